"""``Agent(batch_calls=True)``: the ``execute_plan`` parallel batch offered to the model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolplan import Agent, Budget, UserError, tool
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionInfo, FunctionModel, ScriptedModel


def batch(steps: list[dict[str, Any]], *, call_id: str = "b") -> AssistantMessage:
    return AssistantMessage(
        tool_calls=(ToolCall(id=call_id, name="execute_plan", arguments=json.dumps({"steps": steps})),)
    )


def replies(messages: Any) -> list[ToolReturnMessage]:
    return [m for m in messages if isinstance(m, ToolReturnMessage)]


@tool
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


@tool
def boom(why: str) -> str:
    """Always fails."""
    raise ValueError(why)


def test_the_batch_tool_is_offered_only_when_asked() -> None:
    plain = Agent(ScriptedModel(["ok"]), tools=[double])
    assert "execute_plan" not in [d.name for d in plain.tool_definitions()]
    agent = Agent(ScriptedModel(["ok"]), tools=[double], batch_calls=True)
    definitions = {d.name: d for d in agent.tool_definitions()}
    schema = definitions["execute_plan"].parameters_json_schema
    assert schema["properties"]["steps"]["maxItems"] == 50
    assert schema["properties"]["steps"]["items"]["properties"]["tool"]["enum"] == ["double"]
    assert "execute_plan" in agent.system_prompt()
    assert "execute_plan" in agent.meta_tools()


def test_a_batch_runs_its_calls_and_answers_an_array_in_step_order() -> None:
    model = ScriptedModel(
        [
            batch(
                [
                    {"tool": "double", "args": {"x": 1}},
                    {"tool": "boom", "args": {"why": "no"}},
                    {"tool": "double", "args": {"x": 3}},
                ]
            ),
            "done",
        ]
    )
    agent = Agent(model, tools=[double, boom], batch_calls=True)
    result = agent.run_sync("go")
    assert result.output == "done"
    [reply] = replies(result.messages)
    assert not reply.is_error
    items = json.loads(reply.content)
    assert [(i["step"], i["tool"], i["status"]) for i in items] == [
        (0, "double", "ok"),
        (1, "boom", "error"),
        (2, "double", "ok"),
    ]
    assert items[0]["result"] == 2 and items[2]["result"] == 6
    assert "no" in items[1]["error"] and "result" not in items[1]
    [plan] = result.plan_results
    assert plan.dialect == "batch"


async def test_the_calls_of_a_batch_run_in_parallel() -> None:
    arrived = 0
    all_here = asyncio.Event()

    @tool
    async def meet(who: str) -> str:
        """Waits until all three are here."""
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            all_here.set()
        await asyncio.wait_for(all_here.wait(), timeout=5)  # deadlocks unless all three run at once
        return who

    steps = [{"tool": "meet", "args": {"who": w}} for w in "abc"]
    agent = Agent(ScriptedModel([batch(steps), "done"]), tools=[meet], batch_calls=True)
    result = await agent.run("go")
    assert [i["result"] for i in json.loads(replies(result.messages)[0].content)] == ["a", "b", "c"]


def test_more_than_fifty_steps_run_nothing() -> None:
    ran: list[int] = []

    @tool
    def note(x: int) -> int:
        """Records x."""
        ran.append(x)
        return x

    steps = [{"tool": "note", "args": {"x": i}} for i in range(51)]
    agent = Agent(ScriptedModel([batch(steps), "done"]), tools=[note], batch_calls=True)
    result = agent.run_sync("go")
    [reply] = replies(result.messages)
    assert reply.is_error and "at most 50 steps" in reply.content
    assert ran == []


@pytest.mark.parametrize("inner", ["execute_plan", "execute_tool_plan", "execute_code"])
def test_a_batch_refuses_a_meta_tool_inside(inner: str) -> None:
    steps = [{"tool": "double", "args": {"x": 1}}, {"tool": inner, "args": {"steps": []}}]
    agent = Agent(ScriptedModel([batch(steps), "done"]), tools=[double], batch_calls=True, tool_planning=True)
    result = agent.run_sync("go")
    [reply] = replies(result.messages)
    assert reply.is_error and inner in reply.content
    assert result.plan_results == ()  # an invalid batch runs nothing


def test_a_batch_reference_is_passed_literally() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    steps = [{"tool": "echo", "args": {"text": "$ref:0"}}]
    agent = Agent(ScriptedModel([batch(steps), "done"]), tools=[echo], batch_calls=True)
    items = json.loads(replies(agent.run_sync("go").messages)[0].content)
    assert items == [{"step": 0, "tool": "echo", "status": "ok", "result": "$ref:0"}]


def test_the_run_budget_counts_the_calls_of_a_batch() -> None:
    steps = [{"tool": "double", "args": {"x": i}} for i in range(3)]
    agent = Agent(
        ScriptedModel([batch(steps), "done"]),
        tools=[double],
        batch_calls=True,
        budget=Budget(max_tool_calls=2),
        on_limit="return",
    )
    items = json.loads(replies(agent.run_sync("go").messages)[0].content)
    assert [i["status"] for i in items].count("ok") == 2
    assert [i["status"] for i in items].count("error") == 1


def test_a_model_sees_the_batch_tool_and_can_call_it() -> None:
    seen: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        seen.append([t.name for t in info.tools])
        if not any(isinstance(m, ToolReturnMessage) for m in messages):
            return batch([{"tool": "double", "args": {"x": 21}}])
        return AssistantMessage(content=str(json.loads(replies(messages)[0].content)[0]["result"]))

    agent = Agent(FunctionModel(answer), tools=[double], batch_calls=True)
    assert agent.run_sync("go").output == "42"
    assert "execute_plan" in seen[0]


def test_a_tool_named_execute_plan_is_still_refused() -> None:
    @tool(name="execute_plan")
    def mine() -> str:
        """Mine."""
        return ""

    with pytest.raises(UserError, match="reserved"):
        Agent(ScriptedModel(["ok"]), tools=[mine], batch_calls=True)


def test_calls_over_the_turn_cap_are_pointed_at_the_batch() -> None:
    over = AssistantMessage(
        tool_calls=tuple(ToolCall(id=f"c{i}", name="double", arguments=json.dumps({"x": i})) for i in range(3))
    )
    agent = Agent(ScriptedModel([over, "done"]), tools=[double], batch_calls=True, max_tool_calls_per_turn=2)
    last = replies(agent.run_sync("go").messages)[2]
    assert last.is_error and "put them into one execute_plan" in last.content
    plain = Agent(ScriptedModel([over, "done"]), tools=[double], max_tool_calls_per_turn=2)
    assert "put them into" not in replies(plain.run_sync("go").messages)[2].content
