"""The worker side of code mode on Ray: runs a `CodeRunner` and relays its tool calls to the driver.

`CodeHost` holds the code runs of one worker process (a Ray actor mixes it in; it imports no Ray, so
it also runs in process, which the fast tests use). The driver starts a run, then pulls its events
(`next_events`): a tool call the code makes, or the end of the run; it serves each call through its
own ``call_tool`` (the engine, its limits, budget and records stay in the driver) and sends the
outcome back (`answer`). `cancel` stops a run: the runner is cancelled, which kills its sandbox.

Everything crosses as JSON text: events as bytes the driver parses with the sandbox's bounded parser
(they carry what the code produced, so they are hostile input there), answers as the JSON the inner
runner would have made of the tool's value anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any

from .._errors import ToolplanError
from ..sandbox import CodeLimits, CodeResult, CodeRunner

__all__ = ("CodeHost", "call_failure")

# An answer: (True, the value's JSON text) or (False, the failure's JSON text {"code", "message"}).
_REMOTE_ERRORS: dict[str, type[ToolplanError]] = {}


def call_failure(code: str, message: str) -> ToolplanError:
    """A `ToolplanError` with the given ``code``: how a failed call from the driver reaches the runner.

    The runners turn a `ToolplanError` into ``{code, message}`` for the code (the subprocess runner) or
    its message (Monty), so the code sees the same failure as when it runs in the driver.
    """
    cls = _REMOTE_ERRORS.get(code)
    if cls is None:
        cls = _REMOTE_ERRORS[code] = type("RemoteToolCallError", (ToolplanError,), {"code": code})
    return cls(message)


class _Run:
    """One code run on this worker: its task, its outgoing events and the calls awaiting answers."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[bytes] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[tuple[bool, str]]] = {}
        self.ids = itertools.count(1)
        self.task: asyncio.Task[None] | None = None

    async def call_tool(self, name: str, args: dict[str, Any]) -> Any:
        call_id = next(self.ids)
        waiter = self.waiting[call_id] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(_encode({"op": "call", "id": call_id, "tool": name, "args": args}))
        try:
            ok, text = await waiter
        finally:
            self.waiting.pop(call_id, None)
        if ok:
            return json.loads(text)
        failure = json.loads(text)
        raise call_failure(str(failure.get("code", "tool_error")), str(failure.get("message", "")))

    async def main(self, runner: CodeRunner, code: str, limits: CodeLimits) -> None:
        try:
            result = await runner.run(code, call_tool=self.call_tool, limits=limits)
        except ToolplanError as exc:  # the sandbox could not start (SandboxError), say
            self.events.put_nowait(_encode({"op": "error", "code": exc.code, "message": exc.message}))
            return
        except Exception as exc:  # a runner's own bug: reported, not lost in the worker's logs
            message = f"The code runner failed on the Ray worker: {type(exc).__name__}: {exc}"
            self.events.put_nowait(_encode({"op": "error", "code": "sandbox_error", "message": message}))
            return
        self.events.put_nowait(_done(result))


def _done(result: CodeResult) -> bytes:
    body = {
        "op": "done",
        "result": result.result,
        "result_set": result.result_set,
        "logs": result.logs,
        "error": result.error,
        "limit": result.limit,
        "tool_calls": result.tool_calls,
        "duration": result.duration,
    }
    return _encode(body)


def _encode(event: dict[str, Any]) -> bytes:
    # The inner runner has checked what the code sent (bounded JSON data); `str` is the last resort
    # for anything a runner passes through unchecked, as `json.dumps(default=...)` does in the sandbox.
    return json.dumps(event, ensure_ascii=False, default=str).encode()


class CodeHost:
    """Code runs on this worker, by run id. All methods run on the worker's event loop."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    async def code_start(self, run_id: str, runner: CodeRunner, code: str, limits: CodeLimits) -> None:
        """Start running ``code`` with ``runner``; its events come from `code_next_events`."""
        run = self._runs[run_id] = _Run()
        run.task = asyncio.get_running_loop().create_task(run.main(runner, code, limits))

    async def code_next_events(self, run_id: str) -> list[bytes]:
        """The run's events so far (at least one: waits for it); the run is forgotten after its end."""
        run = self._runs.get(run_id)
        if run is None:
            return [_encode({"op": "error", "code": "sandbox_error", "message": f"No code run {run_id!r} here."})]
        events = [await run.events.get()]
        while not run.events.empty():
            events.append(run.events.get_nowait())
        if run.task is not None and run.task.done() and run.events.empty():
            self._runs.pop(run_id, None)  # its last event (done or error) is in `events`
        return events

    async def code_answer(self, run_id: str, call_id: int, ok: bool, text: str) -> None:
        """The outcome of a tool call: the value's JSON text, or ``{"code", "message"}`` as JSON text."""
        run = self._runs.get(run_id)
        waiter = None if run is None else run.waiting.get(call_id)
        if waiter is not None and not waiter.done():
            waiter.set_result((ok, text))

    async def code_cancel(self, run_id: str) -> None:
        """Stop the run (its runner is cancelled, which kills the sandbox) and forget it."""
        run = self._runs.pop(run_id, None)
        if run is None or run.task is None:
            return
        run.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await run.task
        # Wake a `code_next_events` still waiting for this run (its caller has gone).
        run.events.put_nowait(_encode({"op": "error", "code": "cancelled", "message": "The code run was cancelled."}))

    def code_runs(self) -> int:
        """How many code runs this worker holds (for tests and diagnostics)."""
        return len(self._runs)
