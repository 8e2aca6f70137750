"""``NativeExecutor(agent)`` / ``SequentialExecutor(agent)`` and ``agent.arun``: thin wrappers over a run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolplan import Agent, NativeExecutor, RunContext, SequentialExecutor, UserError, tool
from toolplan.agent import ExecutionStrategy
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import ScriptedModel, TestModel


def calls(*items: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(items))
    )


def tracker() -> tuple[Any, list[str], list[int]]:
    """A tool that records the order calls finish in and the most running at once."""
    order: list[str] = []
    peak = [0]
    running = 0

    @tool
    async def step(name: str) -> str:
        """One step."""
        nonlocal running
        running += 1
        peak[0] = max(peak[0], running)
        await asyncio.sleep(0.01 if name == "a" else 0)
        running -= 1
        order.append(name)
        return name

    return step, order, peak


async def test_sequential_executor_runs_the_agent_one_call_at_a_time() -> None:
    step, order, peak = tracker()
    agent = Agent(ScriptedModel([calls(("step", {"name": "a"}), ("step", {"name": "b"})), "done"]), tools=[step])
    output = await SequentialExecutor(agent).execute("go")
    assert output == "done"
    assert order == ["a", "b"] and peak == [1]
    assert agent.strategy is ExecutionStrategy.NATIVE  # the agent itself is unchanged


async def test_native_executor_takes_the_cogent_options() -> None:
    step, order, peak = tracker()
    script: list[AssistantMessage | str] = [
        calls(("step", {"name": "a"}), ("step", {"name": "b"}), ("step", {"name": "c"})),
        "done",
    ]
    agent = Agent(ScriptedModel(script), tools=[step])
    executor = NativeExecutor(agent, max_tool_calls_per_turn=2, max_concurrent_tools=20, resilience=True)
    result = await executor.run("go")
    assert result.output == "done"
    assert peak == [2] and sorted(order) == ["a", "b"]  # two ran at once; the third was over the cap
    replies = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert replies[2].is_error and "at most 2 run per turn" in replies[2].content
    assert agent.max_tool_calls_per_turn == 50 and agent.max_concurrent_tools == 20


async def test_native_executor_concurrency_comes_from_its_option() -> None:
    step, _, peak = tracker()
    script: list[AssistantMessage | str] = [calls(*(("step", {"name": n}) for n in "abcd")), "done"]
    agent = Agent(ScriptedModel(script), tools=[step])
    assert await NativeExecutor(agent, max_concurrent_tools=1).execute("go") == "done"
    assert peak == [1]


async def test_executors_see_a_model_override() -> None:
    agent = Agent("openai:gpt-4o-mini")
    with agent.override(model=TestModel(custom_output_text="from the test")):
        assert await NativeExecutor(agent).execute("hi") == "from the test"
        assert await SequentialExecutor(agent).execute("hi") == "from the test"


async def test_arun_is_run() -> None:
    agent = Agent(ScriptedModel(["hello"]))
    result = await agent.arun("hi")
    assert result.output == "hello" and result.status == "completed"


def test_resilience_false_says_where_retries_are_set() -> None:
    agent = Agent(TestModel())
    with pytest.raises(UserError, match=r"RetryConfig\(attempts=1\)"):
        NativeExecutor(agent, resilience=False)


async def test_a_turn_executor_has_no_agent_to_run() -> None:
    with pytest.raises(UserError, match=r"NativeExecutor\(agent\)"):
        await NativeExecutor(4).execute("go")
    with pytest.raises(UserError, match="need an agent"):
        NativeExecutor(4, max_concurrent_tools=2)


def test_an_executor_wraps_only_an_agent() -> None:
    with pytest.raises(UserError, match="takes a toolplan Agent"):
        SequentialExecutor("agent")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="takes a toolplan Agent"):
        NativeExecutor(object())  # type: ignore[arg-type]


async def test_execute_passes_deps_and_history() -> None:
    @tool
    def whoami(ctx: RunContext[str]) -> str:
        """The caller."""
        return ctx.deps

    agent = Agent(ScriptedModel([calls(("whoami", {})), "done"]), tools=[whoami], deps_type=str)
    result = await SequentialExecutor(agent).run("go", deps="ada")
    assert [m.content for m in result.messages if isinstance(m, ToolReturnMessage)] == ["ada"]


def test_bad_per_turn_cap_is_refused() -> None:
    agent = Agent(TestModel())
    with pytest.raises(UserError, match="max_tool_calls_per_turn"):
        asyncio.run(NativeExecutor(agent, max_tool_calls_per_turn=0).execute("go"))
