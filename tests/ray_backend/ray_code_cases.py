"""Code mode on Ray: the sandbox runs on a worker (an actor), its tool calls are served in the driver.

Imported by `ray_conformance.py`, which runs inside its own namespaces on the module's one cluster
(the ``ray_backend`` fixture there).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from ray_backend_support import run_ray_example
from ray_tools import compare, refuse, weather

from toolplan import ToolError
from toolplan.agent import Agent
from toolplan.backends import RayBackend
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import CodeLimits, CodeResult, SubprocessRunner
from toolplan.testing import ScriptedModel

_TOOLS = {"weather": weather, "compare": compare, "refuse": refuse}

TWO_TOOLS = """
import os
a = call_tool("weather", {"city": "Oslo"})
b = call_tool("compare", {"a": a["temp"], "b": 2})
set_result({"a": a, "b": b, "pid": os.getpid(), "ppid": os.getppid()})
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    """Wait until ``pid`` has ended (a condition polled up to a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Caller:
    """The driver's ``call_tool``: runs the tools here and records the calls (and a pid the code reports)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.pid: int | None = None
        self.reported = asyncio.Event()

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        if name == "report":
            self.pid = int(args["pid"])
            self.reported.set()
            return None
        result = await _TOOLS[name].execute(name, args)
        if result.error is not None:
            raise ToolError(str(result.error), tool=name)
        return result.content


async def test_code_runs_on_a_worker_and_its_calls_come_back(ray_backend: RayBackend) -> None:
    caller = Caller()
    runner = ray_backend.code_runner(SubprocessRunner())
    result = await runner.run(TWO_TOOLS, call_tool=caller)
    assert result.ok, result.error
    assert result.result["a"] == {"city": "Oslo", "temp": 12, "tags": ["a", "oslo"]}
    assert result.result["b"] == {"a": 12, "b": 2, "note": ""}
    assert [name for name, _ in caller.calls] == ["weather", "compare"]  # served by this process's caller
    assert result.tool_calls == 2
    assert result.result["pid"] != os.getpid()
    # The sandbox child's parent is one of the backend's actors (a Ray worker), not this process.
    assert result.result["ppid"] in ray_backend.actor_pids()


async def test_wall_time_kills_the_sandbox_on_the_worker(ray_backend: RayBackend) -> None:
    caller = Caller()
    code = 'import os, time\ncall_tool("report", {"pid": os.getpid()})\ntime.sleep(120)\nset_result(1)'
    runner = ray_backend.code_runner(SubprocessRunner())
    result = await runner.run(code, call_tool=caller, limits=CodeLimits(wall_time=3))
    assert result.limit == "wall_time" and not result.result_set
    assert "wall time" in (result.error or "")
    assert caller.pid is not None and not _alive(caller.pid)  # reaped on the worker before the result


async def test_cancelling_the_run_kills_the_sandbox_on_the_worker(ray_backend: RayBackend) -> None:
    caller = Caller()
    code = 'import os, time\ncall_tool("report", {"pid": os.getpid()})\ntime.sleep(120)'
    runner = ray_backend.code_runner(SubprocessRunner())
    task = asyncio.create_task(runner.run(code, call_tool=caller, limits=CodeLimits(wall_time=100)))
    await asyncio.wait_for(caller.reported.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert caller.pid is not None
    assert await asyncio.to_thread(_wait_gone, caller.pid, 30)


async def test_a_tool_error_inside_the_code_is_a_result(ray_backend: RayBackend) -> None:
    code = """
try:
    call_tool("refuse", {"message": "no refunds"})
except ToolCallError as exc:
    set_result({"tool": exc.tool, "message": exc.message})
call_tool("refuse", {"message": "still no"})
"""
    result = await ray_backend.code_runner(SubprocessRunner()).run(code, call_tool=Caller())
    assert result.result == {"tool": "refuse", "message": "no refunds"}
    assert not result.ok and "still no" in (result.error or "")


async def test_a_dead_worker_ends_the_run_as_a_failed_result(ray_backend: RayBackend) -> None:
    caller = Caller()
    code = 'import os, time\ncall_tool("report", {"pid": os.getppid(), "child": os.getpid()})\ntime.sleep(120)'
    runner = ray_backend.code_runner(SubprocessRunner())
    task = asyncio.create_task(runner.run(code, call_tool=caller, limits=CodeLimits(wall_time=100)))
    await asyncio.wait_for(caller.reported.wait(), 60)
    assert caller.pid in ray_backend.actor_pids()
    os.kill(caller.pid, signal.SIGKILL)  # the actor holding the run
    result: CodeResult = await asyncio.wait_for(task, 60)
    assert not result.ok and result.limit is None
    assert "Ray worker running the code died mid-run" in (result.error or "")
    assert result.tool_calls == 1
    child = int(caller.calls[0][1]["child"])
    assert await asyncio.to_thread(_wait_gone, child, 30)  # the sandbox died with its worker
    # The pool has healed: code runs again, on live actors.
    again = await runner.run(TWO_TOOLS, call_tool=Caller())
    assert again.ok, again.error


async def test_agent_with_ray_backend_runs_code_on_a_worker(ray_backend: RayBackend) -> None:
    call = ToolCall(id="c1", name="execute_code", arguments=json.dumps({"code": TWO_TOOLS}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"])
    agent = Agent(model=model, tools=[weather, compare], code_execution=SubprocessRunner(), backend=ray_backend)
    result = await agent.run("weather in Oslo")
    assert result.output == "done"
    reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
    body = json.loads(reply.content)
    assert body["status"] == "ok" and body["result"]["b"] == {"a": 12, "b": 2, "note": ""}
    assert body["result"]["ppid"] in ray_backend.actor_pids()
    # The calls the code made are steps of the agent run's record, run through the backend.
    (plan,) = result.plan_results
    assert [s.status for s in plan.steps.values()] == ["succeeded", "succeeded"]


def test_the_code_mode_example_runs_on_the_cluster(ray_backend: RayBackend, tmp_path: Path) -> None:
    first, second = run_ray_example("code_on_ray.py", tmp_path)
    assert json.loads(first) == {"counts": {"ray": 13, "toolplan": 13}, "status": "ok"}
    assert second.startswith("sandbox ran on a Ray worker: True")
