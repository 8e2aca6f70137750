"""Run dependencies: ``Agent(deps_type=...)``, ``run(..., deps=...)`` and tools taking ``RunContext``."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from toolplan import CallContext, RunContext, UserError, execute_plan, tool
from toolplan.agent import Agent
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import FunctionModel, ScriptedModel, TestModel, ToolCallChunk


@dataclass
class Bank:
    owner: str
    balances: dict[str, float] = field(default_factory=lambda: {"main": 10.0})
    seen: list[tuple[str, str, int, str]] = field(default_factory=list)


@tool
def balance(ctx: RunContext[Bank], account: str) -> str:
    """Balance of an account."""
    ctx.deps.seen.append((ctx.run_id, ctx.step_id, ctx.attempt, ctx.idempotency_key))
    return f"{ctx.deps.owner}:{ctx.deps.balances.get(account, 0.0)}"


@tool
async def owner(ctx: RunContext[Bank]) -> str:
    """The account owner."""
    return ctx.deps.owner


def call(name: str, args: dict[str, Any], call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=json.dumps(args)),))


def replies(messages: Any) -> list[ToolReturnMessage]:
    return [m for m in messages if isinstance(m, ToolReturnMessage)]


def test_the_run_context_parameter_is_not_in_the_schema() -> None:
    assert balance.definition.parameters_json_schema == {
        "type": "object",
        "properties": {"account": {"type": "string"}},
        "required": ["account"],
        "additionalProperties": False,
    }
    assert owner.definition.parameters_json_schema["properties"] == {}


async def test_direct_calls_get_the_runs_deps_and_call_context() -> None:
    bank = Bank("ada")
    model = ScriptedModel([call("balance", {"account": "main"}), "done"])
    agent = Agent(model, tools=[balance], deps_type=Bank)
    result = await agent.run("How much?", deps=bank)
    assert replies(result.messages)[0].content == "ada:10.0"
    ((run_id, step_id, attempt, key),) = bank.seen
    assert run_id and step_id == "call0" and attempt == 1 and key == f"{run_id}:call0"


def test_run_sync_passes_deps_to_sync_and_async_tools() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(
                    ToolCall(id="a", name="balance", arguments='{"account": "main"}'),
                    ToolCall(id="b", name="owner", arguments="{}"),
                )
            ),
            "done",
        ]
    )
    result = Agent(model, tools=[balance, owner], deps_type=Bank).run_sync("go", deps=Bank("bo"))
    assert [m.content for m in replies(result.messages)] == ["bo:10.0", "bo"]


async def test_plan_steps_get_the_deps() -> None:
    bank = Bank("cy")
    plan = {
        "steps": [
            {"id": "a", "tool": "balance", "arguments": {"account": "main"}},
            {"id": "b", "tool": "owner", "arguments": {}},
        ]
    }
    model = ScriptedModel([call("execute_tool_plan", plan), "done"])
    result = await Agent(model, tools=[balance, owner], tool_planning=True, deps_type=Bank).run("go", deps=bank)
    assert result.plan_results[0].outputs == {"a": "cy:10.0", "b": "cy"}
    assert [s for _, s, _, _ in bank.seen] == ["a"]


async def test_streamed_plan_steps_get_the_deps() -> None:
    plan_text = json.dumps(
        {
            "steps": [
                {"id": "a", "tool": "balance", "arguments": {"account": "main"}},
                {"id": "b", "tool": "owner", "arguments": {}},
            ]
        }
    )

    async def stream_fn(messages: list[Any], info: Any) -> Any:
        if any(isinstance(m, ToolReturnMessage) for m in messages):
            yield "done"
            return
        yield ToolCallChunk(index=0, id="p1", name="execute_tool_plan", arguments=plan_text[:40])
        yield ToolCallChunk(index=0, arguments=plan_text[40:])

    agent = Agent(
        FunctionModel(stream_function=stream_fn),
        tools=[balance, owner],
        tool_planning=True,
        stream_plans=True,
        deps_type=Bank,
    )
    result = await agent.run("go", deps=Bank("di"))
    assert result.plan_results[0].outputs == {"a": "di:10.0", "b": "di"}


async def test_code_mode_calls_get_the_deps() -> None:
    code = 'set_result([call_tool("balance", {"account": "main"}), call_tool("owner", {})])'
    model = ScriptedModel([call("execute_code", {"code": code}), "done"])
    agent = Agent(model, tools=[balance, owner], code_execution=SubprocessRunner(), deps_type=Bank)
    result = await agent.run("go", deps=Bank("ed"))
    assert json.loads(replies(result.messages)[0].content)["result"] == ["ed:10.0", "ed"]


async def test_run_stream_passes_deps() -> None:
    agent = Agent(TestModel(), tools=[owner], deps_type=Bank)
    async with agent.run_stream("go", deps=Bank("fa")) as stream:
        async for _ in stream:
            pass
    assert stream.result is not None and json.loads(stream.result.output) == {"owner": "fa"}


async def test_concurrent_runs_keep_their_own_deps() -> None:
    gate = asyncio.Event()
    arrived: list[str] = []

    @tool
    async def who(ctx: RunContext[Bank]) -> str:
        arrived.append(ctx.deps.owner)
        if len(arrived) == 2:
            gate.set()
        await gate.wait()  # both runs are inside a tool call at once
        return ctx.deps.owner

    agent = Agent(TestModel(), tools=[who], deps_type=Bank)
    first, second = await asyncio.gather(agent.run("a", deps=Bank("one")), agent.run("b", deps=Bank("two")))
    assert json.loads(first.output) == {"who": "one"} and json.loads(second.output) == {"who": "two"}


async def test_outside_an_agent_run_deps_is_none() -> None:
    @tool
    def peek(ctx: RunContext[None]) -> str:
        return f"{ctx.deps} {ctx.step_id}"

    result = await execute_plan({"steps": [{"id": "s", "tool": "peek", "arguments": {}}]}, [peek])
    assert result.outputs == {"s": "None s"}


async def test_deps_do_not_outlive_the_run() -> None:
    @tool
    def peek(ctx: RunContext[Any]) -> str:
        return repr(ctx.deps)

    await Agent(TestModel(), tools=[peek], deps_type=Bank).run("go", deps=Bank("gi"))
    result = await execute_plan({"steps": [{"id": "s", "tool": "peek", "arguments": {}}]}, [peek])
    assert result.outputs == {"s": "None"}


def test_wrong_or_missing_deps_are_a_clear_user_error() -> None:
    agent = Agent(ScriptedModel([]), tools=[balance], deps_type=Bank)
    with pytest.raises(UserError, match=r"deps_type=Bank, but the run was given no deps\. Pass agent\.run"):
        agent.run_sync("go")
    with pytest.raises(UserError, match="was given deps of type str"):
        agent.run_sync("go", deps="bank")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="deps_type must be a type"):
        Agent(ScriptedModel([]), deps_type="Bank")  # type: ignore[arg-type]


def test_a_tool_can_still_be_called_directly_with_its_own_context() -> None:
    ctx = RunContext(deps=Bank("hu"))
    assert ctx.call is None
    with pytest.raises(UserError, match="no call context"):
        _ = ctx.run_id
    given = RunContext(deps=Bank("hu"), call=CallContext(run_id="r", step_id="s", tool="balance", attempt=2))
    assert balance(given, "main") == "hu:10.0"
    assert given.deps.seen == [("r", "s", 2, "r:s")]


def test_run_context_must_be_the_first_parameter() -> None:
    def late(account: str, ctx: RunContext[Bank]) -> str:
        return account

    with pytest.raises(UserError, match=r"parameter 'ctx' is typed RunContext but is not the first"):
        tool(late)
