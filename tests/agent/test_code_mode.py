from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import tool
from toolplan.agent import Agent, AgentEvent, CodeTool
from toolplan.execute import StepFinished, StepStarted, ToolInvoker
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.plan import Budget
from toolplan.sandbox import CodeRunner, MontyRunner, SubprocessRunner
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolRegistry


@tool
def double(n: int) -> int:
    """Double a number."""
    return n * 2


@tool
def weather(city: str) -> dict[str, Any]:
    """Weather."""
    return {"city": city, "temp": len(city)}


def runners() -> list[CodeRunner]:
    out: list[CodeRunner] = [SubprocessRunner()]
    try:
        import pydantic_monty  # noqa: F401
    except ImportError:  # pragma: no cover - the monty extra is part of the test install
        return out
    out.append(MontyRunner())
    return out


@pytest.fixture(params=runners(), ids=lambda r: r.name)
def runner(request: pytest.FixtureRequest) -> CodeRunner:
    return request.param  # type: ignore[no-any-return]


CODE = """
total = 0
for city in ["Oslo", "Rome", "Lisbon"]:
    w = call_tool("weather", {"city": city})
    total = total + w["temp"]
pair = call_tools_parallel([("double", {"n": total}), ("double", {"n": 1})])
set_result({"total": total, "doubled": pair[0], "one": pair[1]})
"""


async def test_code_calls_go_through_the_plan_engine(runner: CodeRunner) -> None:
    events: list[Any] = []
    tool_ = CodeTool(runner, ToolRegistry([double, weather]))
    result, plan = await tool_.run_code({"code": CODE}, invoker=ToolInvoker(tool_.registry), on_event=events.append)
    assert result.ok, result
    assert result.result == {"total": 14, "doubled": 28, "one": 2}
    assert [s.tool for s in plan.steps.values()] == ["weather", "weather", "weather", "double", "double"]
    assert all(s.ok for s in plan.steps.values())
    assert sum(isinstance(e, StepStarted) for e in events) == 5
    assert sum(isinstance(e, StepFinished) for e in events) == 5


async def test_code_respects_the_shared_budget_and_cannot_recurse(runner: CodeRunner) -> None:
    code = """
out = []
for i in range(3):
    try:
        out.append(call_tool("double", {"n": i}))
    except Exception as e:
        out.append("refused")
try:
    call_tool("execute_tool_plan", {"steps": []})
except Exception as e:
    out.append("no recursion")
try:
    call_tool("not_a_tool", {})
except Exception as e:
    out.append("unknown")
set_result(out)
"""
    tool_ = CodeTool(runner, ToolRegistry([double]))
    invoker = ToolInvoker(tool_.registry, budget=Budget(max_tool_calls=2))
    result, plan = await tool_.run_code({"code": code}, invoker=invoker)
    assert result.result == [0, 2, "refused", "no recursion", "unknown"]
    assert [s.status for s in plan.steps.values()] == ["succeeded", "succeeded", "not_run"]


async def test_agent_with_code_execution(runner: CodeRunner) -> None:
    call = ToolCall(id="x1", name="execute_code", arguments=json.dumps({"code": CODE}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Total is 14."])
    events: list[AgentEvent] = []
    agent = Agent(model=model, tools=[double, weather], code_execution=runner)
    async with agent.run_stream("sum temperatures") as stream:
        async for event in stream:
            events.append(event)
    result = stream.result
    assert result is not None and result.output == "Total is 14."
    reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
    assert json.loads(reply.content)["result"] == {"total": 14, "doubled": 28, "one": 2}
    assert len(result.plan_results) == 1 and len(result.plan_results[0].steps) == 5
    assert "execute_code" in [t.name for t in model.requests[0].tools]
    assert "call_tool" in str(model.requests[0].messages[0].content)
    assert sum(isinstance(e, StepStarted) for e in events) == 5


async def test_code_errors_reach_the_model(runner: CodeRunner) -> None:
    call = ToolCall(id="x1", name="execute_code", arguments=json.dumps({"code": "x = 1 / 0"}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "oops"])
    result = await Agent(model=model, tools=[double], code_execution=runner).run("divide")
    reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
    assert reply.is_error and "ZeroDivisionError" in reply.content


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def test_cancelling_the_agent_run_kills_the_code() -> None:
    import asyncio

    recorded = asyncio.Event()
    pids: list[int] = []

    @tool
    def record(pid: int) -> None:
        """Remember the child's pid."""
        pids.append(pid)
        recorded.set()

    code = 'import os\ncall_tool("record", {"pid": os.getpid()})\nwhile True:\n    pass'
    call = ToolCall(id="x1", name="execute_code", arguments=json.dumps({"code": code}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "never reached"])
    agent = Agent(model=model, tools=[record], code_execution=SubprocessRunner())
    task = asyncio.create_task(agent.run("spin"))
    await asyncio.wait_for(recorded.wait(), timeout=30)
    assert _alive(pids[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pids[0])
