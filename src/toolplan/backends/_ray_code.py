"""The driver of a code run on a worker: `drive` runs code through a `CodeChannel` and serves its tool calls.

`RayCodeRunner` (in `._ray`) runs code mode's sandbox this way: the inner runner (`SubprocessRunner`,
`MontyRunner`) runs on one of the backend's actors with the same confinement and `CodeLimits` as in
process (the sandbox child is the worker's child). Each tool call the code makes comes back here and
goes through the ``call_tool`` code mode gave the runner, so the engine, its limits, budget, events
and records stay in the driver (and the call itself may go to Ray again through the backend). The
driver loop only talks to a `CodeChannel`: the Ray actor in use, or a `CodeHost` in this process in
the tests.

Events from the worker carry what the code produced, so they are parsed and checked like the
sandbox's own frames (`toolplan.sandbox._bounds`); a bad one ends the run with ``limit="protocol"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any, Protocol

from .._errors import SandboxError
from .._tasks import task_group
from ..sandbox import CodeLimits, CodeResult, CodeRunner, ToolCaller

# Private use (marked): the same bounded parser, value check, call check and JSON fallback as the sandbox.
from ..sandbox._internal import (
    DataError,
    DataTooLarge,
    call_problem,
    check_data,
    loads,
    serve_call,
    to_jsonable,
    unserialisable,
)
from ._code_host import CodeHost

__all__ = ("CodeChannel", "LocalCodeChannel", "WorkerGone", "drive")

_GRACE = 15.0  # seconds past the code's wall time before the driver gives up on a silent worker
_MAX_TEXT = 64 * 1024  # an error message or a limit name from the worker, in characters


class WorkerGone(Exception):
    """The worker holding a code run died; ``what`` names how the channel learned of it."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class CodeChannel(Protocol):
    """How the driver reaches the `CodeHost` on a worker. Methods raise `WorkerGone` if it died."""

    where: str

    async def start(self, run_id: str, runner: CodeRunner, code: str, limits: CodeLimits) -> None: ...

    async def next_events(self, run_id: str) -> list[bytes]: ...

    async def answer(self, run_id: str, call_id: int, ok: bool, text: str) -> None: ...

    def cancel(self, run_id: str) -> None:
        """Stop the run on the worker (kills its sandbox) without waiting."""
        ...


class LocalCodeChannel:
    """A `CodeHost` in this process: the driver loop without Ray (tests, diagnostics)."""

    where = "code host in this process"

    def __init__(self, host: CodeHost | None = None) -> None:
        self.host = host or CodeHost()
        self._cancels: set[asyncio.Task[None]] = set()

    async def start(self, run_id: str, runner: CodeRunner, code: str, limits: CodeLimits) -> None:
        await self.host.code_start(run_id, runner, code, limits)

    async def next_events(self, run_id: str) -> list[bytes]:
        return await self.host.code_next_events(run_id)

    async def answer(self, run_id: str, call_id: int, ok: bool, text: str) -> None:
        await self.host.code_answer(run_id, call_id, ok, text)

    def cancel(self, run_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self.host.code_cancel(run_id))
        self._cancels.add(task)  # owned here until done, as a remote cancel is owned by the worker
        task.add_done_callback(self._cancels.discard)


async def drive(
    channel: CodeChannel, runner: CodeRunner, code: str, *, call_tool: ToolCaller, limits: CodeLimits | None
) -> CodeResult:
    """Run ``code`` through ``channel`` and serve its tool calls with ``call_tool`` until it ends."""
    limits = limits or CodeLimits()
    run = _Driven(channel, call_tool, limits)
    started = time.monotonic()
    try:
        async with asyncio.timeout(limits.wall_time + _GRACE):
            await channel.start(run.run_id, runner, code, limits)
            return await run.loop(started)
    except WorkerGone as exc:
        message = (
            f"The {channel.where} running the code died mid-run ({exc.what}), so the code did not finish. "
            f"The {run.calls} tool call(s) it made before that ran and stand: run the code again only if "
            "repeating them is safe. If workers keep dying, check the cluster's logs (running out of memory "
            "is the usual cause)."
        )
        return CodeResult(error=message, tool_calls=run.calls, duration=time.monotonic() - started)
    except TimeoutError:
        channel.cancel(run.run_id)
        message = (
            f"The code was stopped after {limits.wall_time:g} s of wall time (the {channel.where} running it "
            "did not report its end in time). Do less per run, or make slow loops faster."
        )
        return CodeResult(error=message, limit="wall_time", tool_calls=run.calls, duration=time.monotonic() - started)
    except _Refused as exc:
        channel.cancel(run.run_id)
        message = f"The {channel.where} running the code sent a message the driver cannot accept: {exc}."
        return CodeResult(error=message, limit=exc.limit, tool_calls=run.calls, duration=time.monotonic() - started)
    except BaseException:  # cancelled (a timeout, a deadline, fail-fast): stop the sandbox on the worker too
        channel.cancel(run.run_id)
        raise


class _Refused(Exception):
    def __init__(self, message: str, limit: str = "protocol") -> None:
        super().__init__(message)
        self.limit = limit


class _Driven:
    """The driver's side of one run: the event loop and the calls it serves."""

    def __init__(self, channel: CodeChannel, call_tool: ToolCaller, limits: CodeLimits) -> None:
        self.channel, self.call_tool, self.limits = channel, call_tool, limits
        self.run_id = uuid.uuid4().hex
        self.calls = 0
        # A `done` event holds the result (max_message_bytes), the logs (max_output bytes, up to 3 bytes
        # a character once decoded) and the end of a traceback.
        self.max_event = limits.max_message_bytes + 4 * limits.max_output + 2 * _MAX_TEXT

    async def loop(self, started: float) -> CodeResult:
        serving: set[asyncio.Task[None]] = set()
        async with task_group() as tg:
            while True:
                for raw in await self.channel.next_events(self.run_id):
                    event = self._parse(raw)
                    op = event["op"]
                    if op == "call":
                        call_id, name, args = self._call(event)
                        task = tg.create_task(self._serve(call_id, name, args))
                        serving.add(task)
                        task.add_done_callback(serving.discard)
                    elif op == "done":
                        for task in serving:
                            task.cancel()  # calls the code can no longer receive
                        return self._result(event, started)
                    else:
                        raise SandboxError(_text(event.get("message"), "The code runner failed on the worker."))

    def _parse(self, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, bytes):
            raise _Refused(f"an event of type {type(raw).__name__} instead of JSON bytes")
        if len(raw) > self.max_event:
            raise _Refused(f"an event of {len(raw)} bytes (the limit is {self.max_event})", "message_size")
        try:
            event = loads(raw)
        except DataError as exc:
            raise _Refused(f"an event that is not bounded JSON ({exc})") from None
        if not isinstance(event, dict) or event.get("op") not in ("call", "done", "error"):
            raise _Refused("an event that is not a call, done or error object")
        return event

    def _call(self, event: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
        call_id, name, args = event.get("id"), event.get("tool"), event.get("args")
        if type(call_id) is not int:
            raise _Refused("a tool call without an integer id")
        if (problem := call_problem(name, args)) or not isinstance(name, str) or not isinstance(args, dict):
            raise _Refused(f"a malformed tool call ({problem})")
        _check(args, self.limits.max_message_bytes, "a tool call's arguments")
        self.calls += 1
        if self.calls > self.limits.max_tool_calls:
            raise _Refused(f"more than {self.limits.max_tool_calls} tool calls in one run", "tool_calls")
        return call_id, name, args

    async def _serve(self, call_id: int, name: str, args: dict[str, Any]) -> None:
        ok, text = await _outcome(self.call_tool, name, args)
        with contextlib.suppress(WorkerGone):  # the event loop learns it too, and reports it
            await self.channel.answer(self.run_id, call_id, ok, text)

    def _result(self, event: dict[str, Any], started: float) -> CodeResult:
        result_set, logs, tool_calls = event.get("result_set"), event.get("logs"), event.get("tool_calls")
        error, limit = event.get("error"), event.get("limit")
        if not isinstance(result_set, bool) or not isinstance(logs, str) or type(tool_calls) is not int:
            raise _Refused("a 'done' event without result_set, logs and tool_calls")
        if not (error is None or isinstance(error, str)) or not (limit is None or isinstance(limit, str)):
            raise _Refused("a 'done' event whose error or limit is not a string")
        _check(event.get("result"), self.limits.max_message_bytes, "the result")
        return CodeResult(
            result=event.get("result"),
            result_set=result_set,
            logs=logs,
            error=None if error is None else error[:_MAX_TEXT],
            limit=None if limit is None else limit[:100],
            tool_calls=tool_calls,
            duration=time.monotonic() - started,  # the driver's clock: the worker's time plus the round trips
        )


def _check(value: Any, max_bytes: int, what: str) -> None:
    try:
        check_data(value, max_bytes=max_bytes)
    except DataTooLarge as exc:
        raise _Refused(f"{what} of at least {exc.size} bytes (the limit is {max_bytes})", "message_size") from None
    except DataError as exc:
        raise _Refused(f"{what} that is not JSON data ({exc})") from None


def _text(value: Any, default: str) -> str:
    return value[:_MAX_TEXT] if isinstance(value, str) and value else default


async def _outcome(call_tool: ToolCaller, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    """Serve one call in the driver: ``(True, value as JSON)`` or ``(False, {"code", "message"} as JSON)``.

    The failures are the subprocess runner's own (`serve_call`), so the code sees the same thing here.
    """
    outcome = await serve_call(call_tool, name, args)
    if outcome["ok"]:
        try:
            return True, json.dumps(outcome["value"], ensure_ascii=False, default=to_jsonable)
        except (ValueError, TypeError, RecursionError) as exc:  # a cycle, or nested too deep
            outcome = unserialisable(exc)
    return False, json.dumps(outcome["error"])
