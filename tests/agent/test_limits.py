"""A run that stops at a limit raises `UsageLimitExceeded` with the partial result (or returns it)."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from toolplan import Budget, RunError, RunLimits, UsageLimitExceeded, tool
from toolplan.agent import Agent, RunFinished
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionInfo, FunctionModel, ScriptedModel


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def ping_call(i: int) -> AssistantMessage:
    return AssistantMessage(content=f"thinking {i}", tool_calls=(ToolCall(id=f"c{i}", name="ping", arguments="{}"),))


def test_max_iterations_raises_with_the_partial_result() -> None:
    model = ScriptedModel([ping_call(1), ping_call(2)])
    with pytest.raises(UsageLimitExceeded) as info:
        Agent(model, tools=[ping], max_iterations=2).run_sync("loop")
    error = info.value
    assert isinstance(error, RunError) and error.code == "usage_limit_exceeded" and error.limit == "max_iterations"
    assert "max_iterations=2 model requests" in error.message and "Raise max_iterations" in error.message
    partial = error.result
    assert partial.status == "max_iterations" and partial.output == "thinking 2"
    assert partial.usage.requests == 2 and partial.tool_calls == 2
    assert sum(isinstance(m, ToolReturnMessage) for m in partial.messages) == 2
    model.assert_consumed()


def test_the_error_pickles_with_its_partial_result() -> None:
    with pytest.raises(UsageLimitExceeded) as info:
        Agent(ScriptedModel([ping_call(1)]), tools=[ping], max_iterations=1).run_sync("loop")
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is UsageLimitExceeded and again.limit == "max_iterations"
    assert again.result.messages == info.value.result.messages and again.to_dict()["code"] == "usage_limit_exceeded"


def test_on_limit_return_keeps_the_status_only_behaviour() -> None:
    result = Agent(ScriptedModel([ping_call(1)]), tools=[ping], max_iterations=1, on_limit="return").run_sync("x")
    assert result.status == "max_iterations" and result.error is not None and result.output == "thinking 1"


def test_more_calls_after_the_budget_is_spent_raise() -> None:
    model = ScriptedModel([ping_call(1), ping_call(2), ping_call(3)])
    agent = Agent(model, tools=[ping], budget=Budget(max_tool_calls=2))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.run_sync("loop")
    assert info.value.limit == "max_tool_calls" and "max_tool_calls=2 was spent" in info.value.message
    assert info.value.result.status == "usage_limit" and info.value.result.tool_calls == 2
    model.assert_consumed()


def test_a_model_that_answers_within_the_budget_completes() -> None:
    model = ScriptedModel([ping_call(1), ping_call(2), "done"])
    result = Agent(model, tools=[ping], budget=Budget(max_tool_calls=2)).run_sync("go")
    assert result.status == "completed" and result.output == "done"


def test_more_calls_after_the_cost_budget_is_spent_raise() -> None:
    model = ScriptedModel([ping_call(1), ping_call(2)])
    with pytest.raises(UsageLimitExceeded, match=r"max_cost=1 was spent") as info:
        Agent(model, tools=[ping], budget=Budget(max_cost=1)).run_sync("loop")
    assert info.value.limit == "max_cost"


async def test_more_calls_after_the_deadline_raise() -> None:
    never = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns: the run's deadline ends the call."""
        await never.wait()
        return "late"

    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        return AssistantMessage(tool_calls=(ToolCall(id=f"c{len(messages)}", name="hang", arguments="{}"),))

    agent = Agent(FunctionModel(answer), tools=[hang], limits=RunLimits(deadline=0.01))
    with pytest.raises(UsageLimitExceeded) as info:
        await agent.run("go")
    assert info.value.limit == "deadline" and "after the agent run's deadline (0.01 s)" in info.value.message
    partial = info.value.result
    assert partial.status == "usage_limit" and partial.usage.requests == 2
    reply = next(m for m in partial.messages if isinstance(m, ToolReturnMessage))
    assert reply.is_error  # the first call was ended by the deadline and the model was told


def test_on_limit_return_keeps_refusing_calls_past_the_budget_as_before() -> None:
    model = ScriptedModel([ping_call(1), ping_call(2), "done"])
    agent = Agent(model, tools=[ping], budget=Budget(max_tool_calls=1), on_limit="return")
    result = agent.run_sync("loop")
    assert result.status == "completed" and result.output == "done"
    refused = [m for m in result.messages if isinstance(m, ToolReturnMessage)][1]
    assert refused.is_error and "Budget exhausted" in refused.content


async def test_run_stream_raises_at_the_limit_without_a_finished_event() -> None:
    events: list[Any] = []
    agent = Agent(ScriptedModel([ping_call(1)]), tools=[ping], max_iterations=1)
    with pytest.raises(UsageLimitExceeded):
        async with agent.run_stream("loop") as stream:
            async for event in stream:
                events.append(event)
    assert not any(isinstance(e, RunFinished) for e in events) and stream.result is None


def test_readme_style_output_is_never_silently_empty() -> None:
    # The README prints result.output: a run that ends without an answer now says so.
    agent = Agent(ScriptedModel([ping_call(1)] * 3), tools=[ping], max_iterations=3)
    with pytest.raises(UsageLimitExceeded, match="without a final answer"):
        print(agent.run_sync("loop").output)
