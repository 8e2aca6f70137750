"""`SubprocessRunner`: model code in a confined CPython child process."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import socket
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from .._errors import SandboxError
from .._threads import run_in_thread
from ._bounds import MAX_DEPTH
from ._calls import call_problem, encode_reply, serve_call
from ._frames import CallFrame, DoneFrame, Frame, ParallelFrame, ProtocolViolation, ReadyFrame, ResultFrame
from ._platform import prefix_layers, sandbox_prefix
from ._protocol import MessageTooLarge, TruncatedFrame, encode, read_frame
from ._types import CodeLimits, CodeResult, LocalRunner, LogBuffer, ToolCaller

__all__ = ("SubprocessRunner",)

_CHILD = Path(__file__).with_name("_child.py")
_OUTPUT_KILL_FACTOR = 64

_DESCRIPTION = """\
Runs Python 3 (full CPython, standard library only) in an isolated process. Available functions:
- call_tool(name, args=None) -> the tool's value (dicts stay dicts); raises ToolCallError (with .tool,
  .message) if the tool fails.
- call_tools_parallel([(name, args), ...]) -> list of values in input order, run concurrently; a failed
  call appears as a ToolCallError object in the list.
- set_result(value) -> return a JSON-serialisable value (call it once, at the end).
print() output is returned as logs (capped). The current directory is a fresh, empty workspace and the
only place you can write; files elsewhere, network, subprocesses and ctypes are refused."""


class SubprocessRunner(LocalRunner):
    """Runs model code in a child CPython process under layered confinement.

    Layers, strongest first: a network namespace (``unshare -n``, where permitted), a read-only
    root (a private mount namespace where every mount but the workspace is read-only, so file
    metadata outside it cannot change either), no capabilities (even for root), Landlock (file-system
    and TCP rules), seccomp-BPF (no exec, fork, sockets, ptrace, namespaces, mounts; no chmod, chown,
    utime or xattr calls where there is no read-only root), rlimits (memory, CPU, files, file size),
    a wall-time kill of the whole process group, a scrubbed environment and a fresh workspace; plus
    an audit hook inside the interpreter for clear refusals (not a boundary on its own). The kernel
    layers are applied by the same code as `ShellTools`'. See ``docs/code-mode.md`` for the threat
    model.

    Args:
        limits: Defaults for `run` when it is given none.
        python: The interpreter to run; defaults to the current one.
        network_namespace: ``None`` uses one when the platform allows it, ``False`` never, ``True``
            requires it (`run` raises `SandboxError` if it is unavailable).
        mount_namespace: Run in a private mount namespace where every mount but the workspace is
            read-only: ``None`` where the platform allows it, ``True`` requires it (`run` raises
            `SandboxError` without it), ``False`` never. Without it seccomp refuses chmod, chown,
            utime and xattr changes everywhere, so the code cannot change file modes or times even
            in the workspace (``shutil.copy`` of a file fails, for one).
        landlock: Apply Landlock rules when the kernel supports them.
        seccomp: Apply the seccomp filter (x86-64 only).
        audit_hook: Install the in-interpreter guard. Turn it off only to test the kernel layers
            alone: without it refusals are bare ``PermissionError``s with no advice for the model.
    """

    name = "subprocess"
    _description = _DESCRIPTION

    def __init__(
        self,
        *,
        limits: CodeLimits | None = None,
        python: str | None = None,
        network_namespace: bool | None = None,
        mount_namespace: bool | None = None,
        landlock: bool = True,
        seccomp: bool = True,
        audit_hook: bool = True,
    ) -> None:
        self.limits = limits or CodeLimits()
        self.python = python or sys.executable
        self.network_namespace = network_namespace
        self.mount_namespace = mount_namespace
        self.landlock = landlock
        self.seccomp = seccomp
        self.audit_hook = audit_hook
        self.layers: tuple[str, ...] = ()
        """The confinement layers the last run actually got (e.g. ``("netns", "read_only_root", ...)``)."""

    async def _run(
        self, code: str, call_tool: ToolCaller, limits: CodeLimits, inputs: dict[str, Any] | None
    ) -> CodeResult:
        """A fresh child process and workspace."""
        started = time.monotonic()
        network = False if limits.allow_network else self.network_namespace
        prefix = await sandbox_prefix(network=network, mount=self.mount_namespace, what="SubprocessRunner")
        workspace = await run_in_thread(_make_workspace)
        try:
            run = _Run(self, code, call_tool, limits, workspace, prefix, inputs)
            result = await run.execute(started)
            self.layers = run.layers
            return result
        finally:
            await run_in_thread(shutil.rmtree, workspace, ignore_errors=True)


def _make_workspace() -> str:
    return os.path.realpath(tempfile.mkdtemp(prefix="toolplan-code-"))


def _read_roots() -> list[str]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], os.path.dirname(os.__file__)}
    roots.update(p for p in sys.path if p.endswith("lib-dynload"))
    return [*sorted(roots), "/dev/null", "/dev/urandom"]


class _Run:
    """State of one run; everything it starts is owned by `execute`."""

    def __init__(
        self,
        runner: SubprocessRunner,
        code: str,
        call_tool: ToolCaller,
        limits: CodeLimits,
        workspace: str,
        prefix: tuple[str, ...],
        inputs: dict[str, Any] | None = None,
    ) -> None:
        self.runner, self.code, self.call_tool, self.limits = runner, code, call_tool, limits
        self.inputs = inputs or {}
        self.workspace, self.prefix = workspace, prefix
        self.logs = LogBuffer(limits.max_output)
        self.result: Any = None
        self.result_set = False
        self.error: str | None = None
        self.error_kind: str | None = None
        self.done = False
        self.ready = False
        self.layers: tuple[str, ...] = ()
        self.limit: str | None = None
        self.limit_message: str | None = None
        self.truncated: TruncatedFrame | None = None
        self.tool_calls = 0
        self.proc: asyncio.subprocess.Process | None = None
        self.write_lock = asyncio.Lock()
        self.writer: asyncio.StreamWriter | None = None
        self.answers: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def execute(self, started: float) -> CodeResult:
        host_sock, child_sock = socket.socketpair()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.prefix,
                self.runner.python,
                "-I",
                "-S",
                "-B",
                "-X",
                "utf8",
                str(_CHILD),
                str(child_sock.fileno()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=self.workspace,
                env=self._env(),
                start_new_session=True,
                pass_fds=(child_sock.fileno(),),
            )
        finally:
            child_sock.close()
        try:
            reader, self.writer = await asyncio.open_connection(sock=host_sock)
            try:
                async with asyncio.timeout(self.limits.wall_time):
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(self._pump_output())
                        tg.create_task(self._serve(reader, tg))
                        with contextlib.suppress(ConnectionError, OSError):
                            await self._send(self._config())
                        await self.proc.wait()
                        self._killpg()  # anything the code left behind in its process group
                        for task in self.answers:
                            task.cancel()  # tool calls the code can no longer receive
            except TimeoutError:
                self._kill(
                    "wall_time",
                    f"The code was stopped after {self.limits.wall_time:g} s of wall time. "
                    "Do less per run, or make slow loops faster.",
                )
        finally:
            self._killpg()
            if self.writer is not None:
                self.writer.close()
            host_sock.close()
            if self.proc.returncode is None:
                await asyncio.wait_for(self.proc.wait(), timeout=10)
        return self._result(time.monotonic() - started)

    def _env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": self.workspace,
            "TMPDIR": self.workspace,
        }

    def _config(self) -> dict[str, Any]:
        lim = self.limits
        return {
            "op": "start",
            "code": self.code,
            "workspace": self.workspace,
            "read_roots": _read_roots(),
            "allow_network": lim.allow_network,
            "memory": lim.memory,
            "cpu_seconds": max(1, math.ceil(lim.effective_cpu_time)),
            "open_files": lim.max_open_files,
            "file_size": lim.max_file_size,
            "mount_namespace": "--mount" in self.prefix,
            "require": ["read_only_root"] if self.runner.mount_namespace else [],
            "landlock": self.runner.landlock,
            "seccomp": self.runner.seccomp,
            "audit_hook": self.runner.audit_hook,
            "max_depth": MAX_DEPTH,
            "inputs": self.inputs,
        }

    def _killpg(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def _kill(self, limit: str, message: str) -> None:
        if self.limit is None and not self.done:
            self.limit, self.limit_message = limit, message
        self._killpg()

    # -- channels ----------------------------------------------------------------------------------
    async def _pump_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        ceiling = self.limits.max_output * _OUTPUT_KILL_FACTOR
        while chunk := await self.proc.stdout.read(65536):
            self.logs.write(chunk)
            if self.logs.total > ceiling:
                self._kill(
                    "output",
                    f"The code printed more than {ceiling} bytes and was stopped. Print summaries, "
                    "not whole data sets, and return data with set_result(value).",
                )
                return

    async def _send(self, message: dict[str, Any]) -> None:
        await self._send_bytes(encode(message))

    async def _send_bytes(self, data: bytes) -> None:
        assert self.writer is not None
        async with self.write_lock:
            try:
                self.writer.write(data)
                await self.writer.drain()
            except ConnectionError:
                pass  # the child has gone: how it ended is reported from its exit, not from here

    async def _serve(self, reader: asyncio.StreamReader, tg: asyncio.TaskGroup) -> None:
        max_bytes = self.limits.max_message_bytes
        while True:
            try:
                frame = await read_frame(reader, max_bytes)
            except MessageTooLarge as exc:
                self._kill(
                    "message_size",
                    f"The code sent a message of {exc.size} bytes to the host (a tool call's arguments "
                    f"or a result); the limit is {max_bytes}. Return less data, or summarise it first.",
                )
                return
            except TruncatedFrame as exc:  # reported by _result, unless the process died of a limit
                if self.done:
                    self._violation("a frame after 'done'")
                self.truncated = exc
                return
            except ProtocolViolation as exc:
                self._violation(str(exc))
                return
            if frame is None:
                return
            if problem := self._accept(frame, tg):
                self._violation(problem)
                return

    def _accept(self, frame: Frame, tg: asyncio.TaskGroup) -> str | None:
        """Act on a valid frame; returns what is wrong if it comes out of order."""
        if self.done:
            return f"a {frame.op!r} frame after 'done'"
        if isinstance(frame, ReadyFrame):
            if self.ready:
                return "a second 'ready' frame"
            self.ready = True
            self.layers = (*prefix_layers(self.prefix), *frame.layers)
            return None
        if not self.ready:
            return f"a {frame.op!r} frame before 'ready'"
        if isinstance(frame, ResultFrame):
            self.result, self.result_set = frame.value, True
        elif isinstance(frame, DoneFrame):
            self.done = True
            self.error, self.error_kind = frame.error, frame.kind
        else:
            self.answers.add(tg.create_task(self._answer(frame)))
        return None

    def _violation(self, detail: str) -> None:
        """A frame the host cannot accept: the run fails, whatever the code reported before."""
        if self.limit is None:
            self.limit = "protocol"
            self.limit_message = (
                f"The code sent the host a message it cannot accept: {detail}. Pass only JSON data "
                f"(at most {MAX_DEPTH} levels deep, no NaN or Infinity) to call_tool, call_tools_parallel "
                "and set_result, and do not write to the sandbox's channel yourself."
            )
        self._killpg()

    async def _answer(self, frame: CallFrame | ParallelFrame) -> None:
        if isinstance(frame, CallFrame):
            calls = [(frame.tool, frame.args)]
        else:
            calls = [(c[0], c[1]) if isinstance(c, list) and len(c) == 2 else (None, None) for c in frame.calls]
        if self.tool_calls + len(calls) > self.limits.max_tool_calls:
            self._kill(
                "tool_calls",
                f"The code tried to make more than {self.limits.max_tool_calls} tool calls in one run.",
            )
            return
        self.tool_calls += len(calls)
        outcomes = await asyncio.gather(*(self._invoke(name, args) for name, args in calls))
        reply = encode_reply(frame.id, outcomes, parallel=isinstance(frame, ParallelFrame))
        with contextlib.suppress(ConnectionError, OSError):  # the child is gone; execute() reports it
            await self._send_bytes(reply)

    async def _invoke(self, name: Any, args: Any) -> dict[str, Any]:
        if problem := call_problem(name, args):
            return {"ok": False, "error": {"code": "invalid_call", "message": problem}}
        return await serve_call(self.call_tool, name, args)

    # -- outcome -----------------------------------------------------------------------------------
    def _result(self, duration: float) -> CodeResult:
        assert self.proc is not None
        rc = self.proc.returncode
        error, limit = self.error, self.limit
        if limit is not None:
            error = self.limit_message
        elif not self.ready:
            raise SandboxError(
                f"The sandbox process failed to start (exit status {rc}). Its output:\n{self.logs.text()}"
            )
        elif not self.done:
            if rc in (-signal.SIGXCPU, -signal.SIGKILL):
                limit = "cpu_time"
                error = (
                    f"The code used more than {self.limits.effective_cpu_time:g} s of CPU time and was "
                    "stopped. Do less work per run."
                )
            elif self.truncated is not None:
                limit = "protocol"
                error = (
                    f"The code's channel to the host closed in the middle of a message ({self.truncated.got} "
                    f"of {self.truncated.expected} bytes arrived). Do not write to the sandbox's channel "
                    "yourself; use call_tool, call_tools_parallel and set_result."
                )
            else:
                error = f"The code's process ended unexpectedly (exit status {rc})."
        elif self.error_kind == "MemoryError":
            limit = "memory"
            error = f"{error}\nThe code ran out of memory (limit {self.limits.memory} bytes); use less data."
        return CodeResult(
            result=self.result,
            result_set=self.result_set,
            logs=self.logs.text(),
            error=error,
            limit=limit,
            tool_calls=self.tool_calls,
            duration=duration,
        )
