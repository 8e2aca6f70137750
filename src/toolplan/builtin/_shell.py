"""`ShellTools`: shell commands in the code-mode sandbox's confinement, in one workspace directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from typing_extensions import TypedDict

from .._errors import SandboxError, ToolError, UserError
from .._threads import run_in_thread
from ..sandbox._internal import SHELL_LAUNCHER, LogBuffer, landlock_abi, prefix_layers, sandbox_prefix
from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._names import ToolNames, check_names

__all__ = ("ShellLimits", "ShellResult", "ShellTools", "shell_confinement_problem")

_REFUSED = 125
_OUTPUT_KILL_FACTOR = 64
_MiB = 1024 * 1024
_SYSTEM_EXEC = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_READ = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
)
_REQUIRED_LAYERS = ("landlock", "seccomp")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellLimits:
    """Limits of one shell command.

    Attributes:
        wall_time: Seconds before the command and everything it started are killed.
        cpu_time: CPU seconds per process (``None``: ``wall_time``).
        memory: Bytes of address space per process.
        max_output: Bytes of stdout and of stderr kept (head and tail, the cut marked); output beyond
            64 times this kills the command.
        max_processes: Processes the command may run at once (``RLIMIT_NPROC`` above the user's
            current count; the kernel does not apply it to root, where the wall-time kill bounds it).
        max_open_files: Open file descriptors per process.
        max_file_size: Largest file a process may write.
        max_stdin_bytes: Largest ``stdin`` text accepted.
        max_command_chars: Longest command accepted.
    """

    wall_time: float = 30.0
    cpu_time: float | None = None
    memory: int = 1024 * _MiB
    max_output: int = 64 * 1024
    max_processes: int = 64
    max_open_files: int = 256
    max_file_size: int = 64 * _MiB
    max_stdin_bytes: int = _MiB
    max_command_chars: int = 32 * 1024

    def __post_init__(self) -> None:
        for name in (
            "wall_time",
            "memory",
            "max_output",
            "max_processes",
            "max_open_files",
            "max_file_size",
            "max_command_chars",
        ):
            if getattr(self, name) <= 0:
                raise UserError(f"ShellLimits.{name} must be positive, got {getattr(self, name)!r}.")
        if self.cpu_time is not None and self.cpu_time <= 0:
            raise UserError(f"ShellLimits.cpu_time must be positive or None, got {self.cpu_time!r}.")


class ShellResult(TypedDict):
    """What ``run_shell`` returns: the exit status and the (capped) output of the command."""

    exit_code: int
    stdout: str
    stderr: str


def shell_confinement_problem() -> str | None:
    """Why `ShellTools` cannot confine commands on this machine, or None when it can.

    The launcher checks again, in the child, before it runs anything; this is for a clear early
    answer (and for tests to skip on a machine without Landlock).
    """
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"the shell sandbox needs Linux on x86-64 (seccomp filter), not {sys.platform} on {platform.machine()}"
    if landlock_abi() < 1:
        return "the kernel offers no Landlock (Linux 5.13+ with landlock in the lsm= boot list is needed)"
    return None


class ShellTools(Toolset):
    """``run_shell``: a shell command run confined, in one workspace directory, never in the host process.

    Each command runs in ``/bin/sh -c`` in a new process, confined before the shell starts with the
    code-mode sandbox's kernel layers (``toolplan.sandbox._confine``): Landlock lets it read and run
    the system's programs and read and write only the workspace (nothing else: not the user's home,
    not /tmp, not /proc); seccomp forbids sockets (no network, on top of an empty network namespace
    where ``unshare`` is allowed), ptrace, mounts, namespaces and leaving its process group; all
    capabilities are dropped, even for root; rlimits bound memory, CPU, open files, file size and
    (except for root) processes. The whole process group is killed at the wall-time limit and when
    the command ends, so nothing it started in the background outlives the call.

    Where the kernel cannot do this (not Linux x86-64, no Landlock), ``run_shell`` refuses with a
    `SandboxError`: it never runs a command unconfined. `shell_confinement_problem` says why ahead.

    ``run_shell`` is destructive (it can change the workspace) and not idempotent.

    Args:
        workspace: The directory commands run in and may change; it must exist. Share it with
            `FileTools` to let a plan write a file and process it with a command.
        limits: Time, memory, output and process limits (see `ShellLimits`).
        read_only_paths: More files or directories commands may read (not write, not execute).
        env: Extra environment variables (the environment is otherwise scrubbed: PATH, HOME and
            TMPDIR point at the system and the workspace).
        shell: The shell program.
        network_namespace: Also run in an empty network namespace: None uses one where the platform
            allows it, True requires it, False never (seccomp refuses sockets either way).
        mount_namespace: Run in a private mount namespace where every mount but the workspace is
            read-only (so chmod, chown and utime outside it fail too): None where the platform allows
            it, True requires it, False never (seccomp then refuses those calls everywhere, so
            commands cannot change file modes or times even in the workspace).
        max_parallel: Commands of this toolset run at once at most (the tool's ``concurrency``).
        names: ``"toolplan"`` (``run_shell``) or ``"oasis"`` (the same function as ``shell_exec``).
        prefix: Put in front of the function name (see `Toolset`).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: ShellLimits | None = None,
        read_only_paths: tuple[str, ...] | list[str] = (),
        env: dict[str, str] | None = None,
        shell: str = "/bin/sh",
        network_namespace: bool | None = None,
        mount_namespace: bool | None = None,
        max_parallel: int = 4,
        names: ToolNames = "toolplan",
        prefix: str = "",
    ) -> None:
        check_names("ShellTools", names)
        self.workspace = os.path.realpath(os.fspath(workspace))
        if not os.path.isdir(self.workspace):
            raise UserError(
                f"ShellTools workspace {os.fspath(workspace)!r} is not a directory. Create it first, or pass "
                "an existing directory."
            )
        if self.workspace == "/":
            raise UserError("ShellTools workspace cannot be '/': give it a directory of its own.")
        self.limits = limits or ShellLimits()
        self.read_only_paths = tuple(os.path.realpath(p) for p in read_only_paths)
        self.env = dict(env or {})
        self.shell = shell
        self.network_namespace = network_namespace
        self.mount_namespace = mount_namespace
        self.layers: tuple[str, ...] = ()
        """The confinement layers the last command got (e.g. ``("netns", "rlimits", "landlock", ...)``)."""
        name = "shell_exec" if names == "oasis" else "run_shell"
        self._tool = f"{prefix}{name}"
        annotations = ToolAnnotations(destructive=True, timeout=self.limits.wall_time + 15, concurrency=max_parallel)
        super().__init__([FunctionTool(self.run_shell, name=name, annotations=annotations)], prefix=prefix)

    async def run_shell(
        self, command: str, stdin: str | None = None, timeout: float | None = None, check: bool = True
    ) -> ShellResult:
        """Run a shell command (sh -c) in the workspace, without network, and return its exit code and output.

        The command can read and write files in the workspace (the current directory) and run the
        system's programs; it cannot reach the network or files outside the workspace. Output is
        capped (the middle of a long output is dropped and marked).

        Args:
            command: The command line, e.g. 'wc -l data.csv' or 'sort names.txt | uniq -c'.
            stdin: Text given to the command on its standard input.
            timeout: Seconds before the command is killed (at most the toolset's limit).
            check: Fail the call when the command exits with a non-zero status.
        """
        lim = self.limits
        if not command.strip():
            raise ToolError("command is empty: give a shell command line.", tool=self._tool)
        if len(command) > lim.max_command_chars or "\x00" in command:
            raise ToolError(
                f"The command must be at most {lim.max_command_chars} characters of text without NUL; "
                "write long scripts to a file in the workspace and run that.",
                tool=self._tool,
            )
        data = stdin.encode("utf-8", "replace") if stdin is not None else None
        if data is not None and len(data) > lim.max_stdin_bytes:
            raise ToolError(f"stdin is {len(data)} bytes; the limit is {lim.max_stdin_bytes}.", tool=self._tool)
        wall = lim.wall_time if timeout is None else max(0.001, min(timeout, lim.wall_time))
        if problem := shell_confinement_problem():
            raise SandboxError(f"run_shell refused to run the command: {problem}. It never runs commands unconfined.")
        prefix = await self._prefix()
        run = _ShellRun(self, command, data, wall, prefix)
        result = await run.execute()
        self.layers = run.layers
        if run.refusal is not None:
            raise SandboxError(
                f"run_shell refused to run the command: {run.refusal}. It never runs commands unconfined."
            )
        if run.limit is not None:
            raise ToolError(f"{run.limit} {_tail(result)}", tool=self._tool)
        if check and result["exit_code"] != 0:
            raise ToolError(
                f"The command exited with status {_status(result['exit_code'])}. {_tail(result)}"
                " (pass check=false to get the output of a failing command as a result).",
                tool=self._tool,
            )
        return result

    async def _prefix(self) -> tuple[str, ...]:
        """``unshare`` with a private mount namespace (for the read-only root) and an empty network one."""
        return await sandbox_prefix(network=self.network_namespace, mount=self.mount_namespace, what="run_shell")

    def _config(self, command: str, wall: float, prefix: tuple[str, ...]) -> dict[str, Any]:
        lim = self.limits
        cpu = lim.cpu_time if lim.cpu_time is not None else wall
        return {
            "command": command,
            "shell": self.shell,
            "workspace": self.workspace,
            "mount_namespace": "--mount" in prefix,
            "env": {
                "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                "HOME": self.workspace,
                "TMPDIR": self.workspace,
                "PWD": self.workspace,
                "LANG": "C.UTF-8",
                "LC_ALL": "C.UTF-8",
                **self.env,
            },
            "executable": sorted({os.path.realpath(p) for p in _SYSTEM_EXEC if os.path.exists(p)}),
            "read_only": [*_SYSTEM_READ, *self.read_only_paths],
            "read_write": [self.workspace, "/dev/null"],
            "memory": lim.memory,
            "cpu_seconds": max(1, math.ceil(cpu)),
            "open_files": lim.max_open_files,
            "file_size": lim.max_file_size,
            "processes": lim.max_processes,
            "require": [*_REQUIRED_LAYERS, *(("read_only_root",) if self.mount_namespace else ())],
        }


class _ShellRun:
    """One command: the launcher process, its output and its status pipe, all owned by `execute`."""

    def __init__(self, tools: ShellTools, command: str, stdin: bytes | None, wall: float, prefix: tuple[str, ...]):
        self.tools, self.command, self.stdin, self.wall, self.prefix = tools, command, stdin, wall, prefix
        self.stdout = LogBuffer(tools.limits.max_output)
        self.stderr = LogBuffer(tools.limits.max_output)
        self.limit: str | None = None
        self.refusal: str | None = None
        self.layers: tuple[str, ...] = ()
        self.proc: asyncio.subprocess.Process | None = None

    async def execute(self) -> ShellResult:
        # The output pipes are ours, not asyncio's: Process.wait() then returns when the shell exits,
        # even while something it started in the background still holds them (and is killed next).
        stdin = await run_in_thread(_stdin_file, self.stdin) if self.stdin is not None else None
        status_read, status_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            config = json.dumps(self.tools._config(self.command, self.wall, self.prefix))
            self.proc = await asyncio.create_subprocess_exec(
                *self.prefix,
                sys.executable,
                "-I",
                "-S",
                "-B",
                str(SHELL_LAUNCHER),
                str(status_write),
                config,
                stdin=stdin.fileno() if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=out_write,
                stderr=err_write,
                cwd=self.tools.workspace,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
                pass_fds=(status_write,),
            )
        except BaseException:
            for fd in (status_read, out_read, err_read):
                os.close(fd)
            raise
        finally:
            for fd in (status_write, out_write, err_write):
                os.close(fd)
            if stdin is not None:
                stdin.close()
        try:
            async with _PipeReader(out_read) as out, _PipeReader(err_read) as err:
                try:
                    async with asyncio.timeout(self.wall), asyncio.TaskGroup() as tg:
                        tg.create_task(self._pump(out, self.stdout))
                        tg.create_task(self._pump(err, self.stderr))
                        await self.proc.wait()
                        self._killpg()  # whatever the command left running in the background
                except TimeoutError:
                    self._stop(
                        f"The command was stopped after {self.wall:g} s (time limit); make it do less, or split it."
                    )
        finally:
            self._killpg()
            if self.proc.returncode is None:
                await asyncio.wait_for(self.proc.wait(), timeout=10)
            status = await run_in_thread(_read_all, status_read)
        self._read_status(status, status_required=self.limit is None)
        return {"exit_code": self.proc.returncode or 0, "stdout": self.stdout.text(), "stderr": self.stderr.text()}

    def _read_status(self, status: bytes, *, status_required: bool) -> None:
        lines = [line for line in status.decode("utf-8", "replace").splitlines() if line.strip()]
        if not lines:  # killed at a limit before it could report: the limit is the story
            if status_required:
                self.refusal = "the sandbox launcher ended without reporting whether it could confine the command"
            return
        try:
            last = json.loads(lines[-1])
        except ValueError:
            self.refusal = "the sandbox launcher sent an unreadable report"
            return
        self.layers = (*prefix_layers(self.prefix), *last.get("layers", ()))
        if not last.get("ok"):
            self.refusal = str(last.get("error", "unknown failure"))[:500]

    async def _pump(self, stream: asyncio.StreamReader, buffer: LogBuffer) -> None:
        ceiling = self.tools.limits.max_output * _OUTPUT_KILL_FACTOR
        while chunk := await stream.read(65536):
            buffer.write(chunk)
            if self.stdout.total + self.stderr.total > ceiling:
                self._stop(f"The command printed more than {ceiling} bytes and was stopped; print less (e.g. | head).")
                return

    def _stop(self, message: str) -> None:
        if self.limit is None:
            self.limit = message
        self._killpg()

    def _killpg(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)


class _PipeReader:
    """An asyncio reader of the read end of a pipe we made; closes it on exit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.transport: asyncio.ReadTransport | None = None

    async def __aenter__(self) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        try:
            self.transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self.fd, "rb", buffering=0)
            )
        except BaseException:
            os.close(self.fd)
            raise
        return reader

    async def __aexit__(self, *exc_info: object) -> None:
        if self.transport is not None:
            self.transport.close()


def _stdin_file(data: bytes) -> Any:
    """An unlinked temporary file holding ``data``, at its start: the command's standard input."""
    f = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the caller, who closes it
    f.write(data)
    f.flush()
    f.seek(0)
    return f


def _read_all(fd: int) -> bytes:
    """Everything in the status pipe (every writer has closed it by now), then close it."""
    chunks = []
    try:
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _status(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"{code} (killed by {signal.Signals(-code).name})"
    return str(code)


def _tail(result: ShellResult) -> str:
    err = result["stderr"].strip()
    out = result["stdout"].strip()
    text = err or out
    if not text:
        return ""
    return f"Last output: {text[-500:]!r}."
