"""Code mode on Ray without Ray: the driver loop against a `CodeHost` in process and a hostile channel."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolplan import SandboxError, ToolError, tool
from toolplan.agent import Agent
from toolplan.backends import RayBackend, RayCodeRunner
from toolplan.backends._ray_code import LocalCodeChannel, WorkerGone, drive
from toolplan.sandbox import CodeLimits, CodeRunner, MontyRunner, SubprocessRunner
from toolplan.testing import TestModel


class Calls:
    """The driver's ``call_tool``: records the calls, fails ``refuse``, returns a cycle for ``cyclic``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.reported = asyncio.Event()
        self.pid = 0

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        if name == "refuse":
            raise ToolError("no refunds", tool=name)
        if name == "crash":
            raise KeyError("boom")
        if name == "cyclic":
            loop: list[Any] = []
            loop.append(loop)
            return loop
        if name == "report":
            self.pid = int(args["pid"])
            self.reported.set()
        return {"echo": args}


CODE = """
a = call_tool("echo", {"x": 1})
out = call_tools_parallel([("refuse", {}), ("crash", {}), ("cyclic", {}), ("echo", {"y": 2})])
set_result({"a": a, "out": [o if isinstance(o, dict) else o.message for o in out]})
"""


async def test_the_driver_serves_the_code_calls_through_its_call_tool() -> None:
    calls = Calls()
    result = await drive(LocalCodeChannel(), SubprocessRunner(), CODE, call_tool=calls, limits=None)
    assert result.ok, result.error
    a, out = result.result["a"], result.result["out"]
    assert a == {"echo": {"x": 1}}
    assert out[0] == "no refunds"
    assert out[1] == "KeyError: 'boom'"  # a tool's own exception, as the runner reports it in process
    assert "cannot be sent to the code as JSON" in out[2]
    assert out[3] == {"echo": {"y": 2}}
    assert sorted(name for name, _ in calls.calls) == ["crash", "cyclic", "echo", "echo", "refuse"]
    assert result.tool_calls == 5


async def test_a_monty_runner_goes_through_the_same_host() -> None:
    pytest.importorskip("pydantic_monty")
    code = """
a = call_tool("echo", {"x": 1})
try:
    call_tool("refuse", {})
except Exception as e:
    b = str(e)
set_result([a, b])
"""
    result = await drive(LocalCodeChannel(), MontyRunner(), code, call_tool=Calls(), limits=None)
    assert result.ok, result.error
    assert result.result == [{"echo": {"x": 1}}, "Tool 'refuse' failed: no refunds"]


async def test_cancelling_the_driver_kills_the_sandbox() -> None:
    calls, channel = Calls(), LocalCodeChannel()
    code = 'import os, time\ncall_tool("report", {"pid": os.getpid()})\ntime.sleep(120)'
    task = asyncio.create_task(drive(channel, SubprocessRunner(), code, call_tool=calls, limits=None))
    await asyncio.wait_for(calls.reported.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.gather(*channel._cancels)  # the cancel the driver sent has run on the "worker"
    assert channel.host.code_runs() == 0
    assert _gone(calls.pid)  # killed and reaped before the cancel returned


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class Scripted:
    """A channel whose worker sends the given events, then dies (or stays silent)."""

    where = "fake worker"

    def __init__(self, *events: Any, then: str = "die") -> None:
        self.events = list(events)
        self.then = then
        self.cancelled: list[str] = []
        self.answers: list[tuple[int, bool, str]] = []

    async def start(self, run_id: str, runner: CodeRunner, code: str, limits: CodeLimits) -> None:
        pass

    async def next_events(self, run_id: str) -> list[Any]:
        if self.events:
            return [self.events.pop(0)]
        if self.then == "die":
            raise WorkerGone("ActorDiedError")
        await asyncio.Event().wait()  # silent forever
        raise AssertionError

    async def answer(self, run_id: str, call_id: int, ok: bool, text: str) -> None:
        self.answers.append((call_id, ok, text))

    def cancel(self, run_id: str) -> None:
        self.cancelled.append(run_id)


def _call(call_id: Any = 1, tool_name: Any = "echo", args: Any = None) -> bytes:
    return json.dumps({"op": "call", "id": call_id, "tool": tool_name, "args": {} if args is None else args}).encode()


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


DONE = {"op": "done", "result": 1, "result_set": True, "logs": "", "error": None, "limit": None, "tool_calls": 0}


@pytest.mark.parametrize(
    ("event", "limit", "says"),
    [
        ("not bytes", "protocol", "of type str"),
        (b"{not json", "protocol", "not bounded JSON"),
        (b"[" * 300 + b"]" * 300, "protocol", "nested more than"),
        (b'{"op": "call", "id": 1, "tool": "echo", "args": {"x": NaN}}', "protocol", "NaN"),
        (b'{"op": "exec"}', "protocol", "not a call, done or error"),
        (_call(tool_name=7), "protocol", "tool name must be"),
        (_call(args=[1]), "protocol", "args must be a dict"),
        (_call(call_id="1"), "protocol", "integer id"),
        (_call(args={"a": "x" * 2000}), "message_size", "arguments of at least"),
        (b" " * 200_000, "message_size", "an event of 200000 bytes"),
        (json.dumps({**DONE, "logs": 5}).encode(), "protocol", "without result_set"),
        (json.dumps({**DONE, "error": 5}).encode(), "protocol", "error or limit is not a string"),
        (json.dumps({**DONE, "result": {"a": "x" * 2000}}).encode(), "message_size", "the result of at least"),
        (json.dumps({**DONE, "result": _nested(150)}).encode(), "protocol", "nested more than 100"),
    ],
)
async def test_hostile_events_end_the_run_with_a_limit(event: Any, limit: str, says: str) -> None:
    channel = Scripted(event)
    limits = CodeLimits(max_message_bytes=1000, max_output=100)
    result = await drive(channel, SubprocessRunner(), "", call_tool=Calls(), limits=limits)
    assert result.limit == limit and says in (result.error or ""), result.error
    assert "The fake worker running the code sent a message the driver cannot accept" in (result.error or "")
    assert channel.cancelled  # the run is stopped on the worker


async def test_too_many_calls_end_the_run() -> None:
    channel = Scripted(_call(1), _call(2), _call(3))
    result = await drive(channel, SubprocessRunner(), "", call_tool=Calls(), limits=CodeLimits(max_tool_calls=2))
    assert result.limit == "tool_calls" and channel.cancelled


async def test_a_dead_worker_is_a_failed_result_not_an_exception() -> None:
    calls = Calls()
    channel = Scripted(_call(1, "echo", {"x": 1}))
    result = await drive(channel, SubprocessRunner(), "", call_tool=calls, limits=None)
    assert not result.ok and result.limit is None and result.tool_calls == 1
    assert (result.error or "").startswith("The fake worker running the code died mid-run (ActorDiedError)")
    assert "run the code again only if repeating them is safe" in (result.error or "")


async def test_a_silent_worker_is_stopped_after_the_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolplan.backends._ray_code as ray_code

    monkeypatch.setattr(ray_code, "_GRACE", 0.0)
    channel = Scripted(then="silent")
    result = await drive(channel, SubprocessRunner(), "", call_tool=Calls(), limits=CodeLimits(wall_time=0.2))
    assert result.limit == "wall_time" and "did not report its end in time" in (result.error or "")
    assert channel.cancelled


async def test_a_sandbox_that_cannot_start_raises_as_in_process() -> None:
    event = json.dumps({"op": "error", "code": "sandbox_error", "message": "no unshare here"}).encode()
    with pytest.raises(SandboxError, match="no unshare here"):
        await drive(Scripted(event), SubprocessRunner(), "", call_tool=Calls(), limits=None)


@tool
def double(x: int) -> int:
    """Twice x."""
    return 2 * x


def test_an_agent_on_ray_runs_code_on_workers_unless_told_not_to() -> None:
    runner = SubprocessRunner()
    on = Agent(TestModel(), tools=[double], code_execution=runner, backend=RayBackend())
    wrapped = on.meta_tools()["execute_code"].runner  # type: ignore[attr-defined]
    assert isinstance(wrapped, RayCodeRunner) and wrapped.runner is runner
    assert wrapped.name == "subprocess" and wrapped.describe() == runner.describe()
    assert wrapped.limits is runner.limits
    off = Agent(TestModel(), tools=[double], code_execution=runner, backend=RayBackend(code_on_workers=False))
    assert off.meta_tools()["execute_code"].runner is runner  # type: ignore[attr-defined]
    # Wrapping twice does not nest; the system prompt does not change.
    assert RayBackend().code_runner(wrapped) is wrapped
    assert on.system_prompt() == off.system_prompt()
