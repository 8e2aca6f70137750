"""`MontyRunner`: model code in Monty, a sandboxed interpreter for a Python subset (pydantic-monty)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from .._errors import SandboxError
from .._optional import import_optional
from ._bounds import DataError, DataTooLarge, check_data
from ._calls import serve_call
from ._protocol import to_jsonable
from ._types import CodeLimits, CodeResult, LocalRunner, LogBuffer, ToolCaller

if TYPE_CHECKING:
    import pydantic_monty

__all__ = ("MontyRunner",)

_OUTPUT_KILL_FACTOR = 64
_FUNCTIONS = ("call_tool", "call_tools_parallel", "set_result")
# Monty has no class inheritance, so the code's ToolCallError is RuntimeError under another name.
_PRELUDE = "ToolCallError = RuntimeError\n"

_DESCRIPTION = """\
Runs a subset of Python 3 in the Monty sandbox: functions, loops, comprehensions, dicts, lists,
f-strings, try/except, and modules such as json, re, math, datetime (no class inheritance, no file
system, no network, no third-party imports). Available functions:
- call_tool(name, args=None) -> the tool's value (dicts stay dicts); raises ToolCallError (a
  RuntimeError) if the tool fails.
- call_tools_parallel([(name, args), ...]) -> list of values in input order, run concurrently; a failed
  call appears as a ToolCallError object in the list.
- set_result(value) -> return a JSON-serialisable value (call it once, at the end).
print() output is returned as logs (capped)."""


def _import_monty() -> Any:
    return import_optional("pydantic_monty", "MontyRunner", "monty", package="pydantic-monty")


class MontyRunner(LocalRunner):
    """Runs model code in the Monty interpreter; the recommended runner for untrusted code.

    Monty implements Python in Rust with no file system, network, subprocess or import machinery to
    reach the host: the only ways out are the three functions toolplan hands it. It runs in a
    ``monty`` worker process per run, with heap-memory and execution-time limits enforced inside the
    interpreter and a wall-time kill on the host. Needs ``pip install "toolplan[monty]"``.

    Args:
        limits: Defaults for `run` when it is given none.
        binary_path: The ``monty`` worker binary; found automatically when ``pydantic-monty`` is
            installed.
    """

    name = "monty"
    _description = _DESCRIPTION

    def __init__(self, *, limits: CodeLimits | None = None, binary_path: str | None = None) -> None:
        self.limits = limits or CodeLimits()
        self.binary_path = binary_path

    async def _run(
        self, code: str, call_tool: ToolCaller, limits: CodeLimits, inputs: dict[str, Any] | None
    ) -> CodeResult:
        """A fresh Monty session."""
        run = _MontyRun(_import_monty(), call_tool, limits, inputs)
        return await run.execute(code, self.binary_path)


class _MontyRun:
    def __init__(
        self, monty: Any, call_tool: ToolCaller, limits: CodeLimits, inputs: dict[str, Any] | None = None
    ) -> None:
        self.monty, self.call_tool, self.limits, self.inputs = monty, call_tool, limits, inputs
        self.logs = LogBuffer(limits.max_output)
        self.result: Any = None
        self.result_set = False
        self.tool_calls = 0
        self.error: str | None = None
        self.limit: str | None = None
        self.stop = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    async def execute(self, code: str, binary_path: str | None) -> CodeResult:
        started = time.monotonic()
        lim = self.limits
        pool = self.monty.AsyncMonty(
            binary_path=binary_path, min_processes=1, max_processes=1, request_timeout=lim.wall_time + 5
        )
        monty_limits = {
            "max_memory": lim.memory,
            "max_feed_duration_secs": lim.effective_cpu_time,
            "max_suspensions": lim.max_tool_calls + 1000,
        }
        try:
            async with asyncio.timeout(lim.wall_time), pool, pool.checkout(limits=monty_limits) as session:
                try:
                    await session.feed_run(_PRELUDE)
                    async with asyncio.TaskGroup() as tg:
                        drive = tg.create_task(self._drive(session, code))
                        stopper = tg.create_task(self.stop.wait())
                        await asyncio.wait({drive, stopper}, return_when=asyncio.FIRST_COMPLETED)
                        drive.cancel()
                        stopper.cancel()
                    if not drive.done() or drive.cancelled():
                        _kill(session.worker_pid)  # stopped mid-feed: the worker's state is garbage
                except BaseException:  # cancelled or timed out: kill before the pool takes it back
                    _kill(session.worker_pid)
                    raise
        except TimeoutError:
            self._fail("wall_time", f"The code was stopped after {lim.wall_time:g} s of wall time. Do less per run.")
        except FileNotFoundError as exc:  # no worker binary
            raise SandboxError(f"The Monty worker could not be started: {exc}") from exc
        return CodeResult(
            result=self.result,
            result_set=self.result_set,
            logs=self.logs.text(),
            error=self.error,
            limit=self.limit,
            tool_calls=self.tool_calls,
            duration=time.monotonic() - started,
        )

    def _fail(self, limit: str | None, message: str) -> None:
        if self.error is None:
            self.limit, self.error = limit, message

    def _print(self, stream: str, text: str) -> None:
        self.logs.write(text.encode())
        ceiling = self.limits.max_output * _OUTPUT_KILL_FACTOR
        if self.logs.total > ceiling and self.error is None:
            self._fail("output", f"The code printed more than {ceiling} bytes and was stopped. Print less.")
            self.loop.call_soon_threadsafe(self.stop.set)

    async def _drive(self, session: pydantic_monty.AsyncMontySession, code: str) -> None:
        m = self.monty
        try:
            snap = await session.feed_start(code, inputs=self.inputs, print_callback=self._print)
            while not isinstance(snap, m.MontyComplete):
                if isinstance(snap, m.AsyncFunctionSnapshot):
                    if snap.is_os_function:
                        snap = await snap.resume_not_handled()
                    else:
                        answer = await self._call(str(snap.function_name), snap.args, snap.kwargs)
                        if self.stop.is_set():
                            return
                        snap = await snap.resume(answer)
                elif isinstance(snap, m.AsyncNameLookupSnapshot):
                    snap = await snap.resume()
                else:
                    raise SandboxError(f"Monty paused in an unexpected state: {snap!r}")
        except m.MontyRuntimeError as exc:
            self._runtime_error(exc)
        except m.MontySyntaxError as exc:
            self._fail(None, exc.display("traceback"))
        except m.MontyCrashedError as exc:
            limit = "wall_time" if exc.timed_out else None
            self._fail(limit, f"The Monty interpreter crashed and was replaced: {exc}")

    def _runtime_error(self, exc: Any) -> None:
        summary = str(exc.display("type-msg"))
        lines = str(exc.display("traceback")).splitlines()
        text = "\n".join(lines[-12:])
        if summary.startswith("MemoryError"):
            self._fail("memory", f"{text}\nThe code ran out of memory (limit {self.limits.memory} bytes).")
        elif summary.startswith("TimeoutError") and "time limit exceeded" in summary:
            self._fail("cpu_time", f"{text}\nThe code ran too long and was stopped. Do less work per run.")
        elif "max_suspensions" in summary or "suspension" in summary.lower():
            self._fail("tool_calls", f"{text}\nThe code made too many tool calls in one run.")
        else:
            self._fail(None, text)

    async def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        room = self.limits.max_message_bytes
        try:
            if name == "call_tool":
                tool, tool_args = _tool_call(*args, **kwargs)
                tool_args, _ = self._data(tool_args, "call_tool arguments", room)
                self._count(1)
                return _answer(await self._invoke(tool, tool_args))
            if name == "call_tools_parallel":
                calls = []
                for tool, tool_args in _parallel_calls(*args, **kwargs):  # all together within the size
                    tool_args, size = self._data(tool_args, "call_tools_parallel arguments", room)
                    calls.append((tool, tool_args))
                    room -= size
                self._count(len(calls))
                outcomes = await asyncio.gather(*(self._invoke(t, a) for t, a in calls))
                return {"return_value": [_settle(o) for o in outcomes]}
            if name == "set_result":
                self.result, _ = self._data(_set_result_value(*args, **kwargs), "set_result(value)", room)
                self.result_set = True
                return {"return_value": None}
        except TypeError as exc:
            return {"exc_type": "TypeError", "message": str(exc)}
        except _Stop as exc:
            self._fail(exc.limit, str(exc))
            self.stop.set()
            return {"exc_type": "RuntimeError", "message": str(exc)}
        known = ", ".join(_FUNCTIONS)
        return {"exc_type": "NameError", "message": f"name {name!r} is not defined (available: {known})"}

    def _data(self, value: Any, what: str, room: int) -> tuple[Any, int]:
        """``value`` from the interpreter as plain JSON data, and its size, after checking its bounds.

        Raises:
            TypeError: It is not bounded JSON data (goes back to the code as its exception).
            _Stop: Its JSON text is longer than ``room`` bytes.
        """
        try:
            check_data(value, max_bytes=room)
        except DataError as exc:
            raise TypeError(f"{what} must be JSON-serialisable: {exc}.") from None
        except DataTooLarge:
            raise self._too_large() from None
        text = json.dumps(value, allow_nan=False)  # safe now: bounded, finite, no cycles
        if len(text) > room:
            raise self._too_large()
        return json.loads(text), len(text)

    def _too_large(self) -> _Stop:
        return _Stop(
            "message_size",
            f"The code passed more than {self.limits.max_message_bytes} bytes to the host (a tool call's "
            "arguments or a result); that is the limit. Return less data, or summarise it first.",
        )

    def _count(self, n: int) -> None:
        if self.tool_calls + n > self.limits.max_tool_calls:
            raise _Stop("tool_calls", f"The code tried to make more than {self.limits.max_tool_calls} tool calls.")
        self.tool_calls += n

    async def _invoke(self, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
        outcome = await serve_call(self.call_tool, tool, args)  # failures as the subprocess runner makes them
        if not outcome["ok"]:
            return False, f"Tool {tool!r} failed: {outcome['error']['message']}"
        # Same plain-JSON values as the subprocess runner, and nothing Monty cannot convert.
        try:
            return True, json.loads(json.dumps(outcome["value"], default=to_jsonable))
        except (ValueError, TypeError, RecursionError) as exc:  # a cycle, or nested too deep
            return False, (
                f"Tool {tool!r} returned a value that cannot be passed to the code as JSON "
                f"({type(exc).__name__}: {str(exc)[:200]}). The tool must return JSON data without cycles."
            )


def _kill(pid: int | None) -> None:
    """SIGKILL a worker the pool still owns (so its pid cannot have been reused yet)."""
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class _Stop(Exception):
    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def _answer(outcome: tuple[bool, Any]) -> dict[str, Any]:
    ok, value = outcome
    return {"return_value": value} if ok else {"exc_type": "RuntimeError", "message": value}


def _settle(outcome: tuple[bool, Any]) -> Any:
    ok, value = outcome
    return value if ok else RuntimeError(value)


def _tool_call(name: Any = None, args: Any = None) -> tuple[str, dict[str, Any]]:
    if not isinstance(name, str):
        raise TypeError("call_tool(name, args=None): name must be a string")
    if args is not None and not isinstance(args, dict):
        raise TypeError(f"call_tool({name!r}, args): args must be a dict or None")
    return name, dict(args or {})


def _parallel_calls(calls: Any = None) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(calls, list | tuple):
        raise TypeError("call_tools_parallel expects a list of (name, args_dict) pairs")
    out = []
    for call in calls:
        if isinstance(call, str):
            out.append(_tool_call(call))
        elif isinstance(call, list | tuple) and len(call) in (1, 2):
            out.append(_tool_call(*call))
        else:
            raise TypeError("call_tools_parallel expects a list of (name, args_dict) pairs")
    return out


def _set_result_value(value: Any = None) -> Any:
    return value
