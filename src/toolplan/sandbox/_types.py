"""The seam between code mode and the rest of toolplan: limits, results, the runner protocol."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

__all__ = ("CodeLimits", "CodeResult", "CodeRunner", "LocalRunner", "LogBuffer", "ToolCaller")

ToolCaller: TypeAlias = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Host side of a tool call from code: ``await call_tool(name, args)`` returns the tool's value and
raises `toolplan.ToolError` (or another `toolplan.ToolplanError`) when the call fails."""

_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeLimits:
    """Resource limits for one run of model code. Each runner enforces the ones it can.

    Attributes:
        wall_time: Seconds of wall-clock time before the code is killed (``limit="wall_time"``).
        cpu_time: Seconds of CPU (subprocess) or interpreter execution time (Monty, which does not
            count time spent waiting for tools); ``None`` means the same as ``wall_time``.
        memory: Bytes of memory (address space for the subprocess, heap for Monty).
        max_output: Bytes of printed output kept in ``CodeResult.logs``; the rest is dropped and the
            cut is marked. Output beyond 64 times this kills the code (``limit="output"``).
        max_open_files: Open file descriptors in the subprocess (``RLIMIT_NOFILE``).
        max_file_size: Largest file the subprocess may write in its workspace (``RLIMIT_FSIZE``).
        max_message_bytes: Largest protocol message accepted from the code (a tool call's arguments,
            a result); a larger one kills it (``limit="message_size"``).
        max_tool_calls: Tool calls allowed in one run (``limit="tool_calls"``).
        allow_network: Let the subprocess open sockets. Off by default; Monty never has network.
    """

    wall_time: float = 30.0
    cpu_time: float | None = None
    memory: int = 256 * _MiB
    max_output: int = 16 * 1024
    max_open_files: int = 64
    max_file_size: int = 64 * _MiB
    max_message_bytes: int = 8 * _MiB
    max_tool_calls: int = 1000
    allow_network: bool = False

    def __post_init__(self) -> None:
        for name in ("wall_time", "memory", "max_output", "max_open_files", "max_message_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"CodeLimits.{name} must be positive, got {getattr(self, name)!r}.")
        if self.cpu_time is not None and self.cpu_time <= 0:
            raise ValueError(f"CodeLimits.cpu_time must be positive or None, got {self.cpu_time!r}.")

    @property
    def effective_cpu_time(self) -> float:
        """``cpu_time``, or ``wall_time`` when it is not set."""
        return self.cpu_time if self.cpu_time is not None else self.wall_time


_NO_RESULT_HINT = (
    "The code finished without returning a value. Call set_result(value) with a JSON-serialisable "
    "value to return it; print() output only appears in the logs."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeResult:
    """What one run of model code produced.

    Attributes:
        result: The value passed to ``set_result`` (``None`` if it was never called).
        result_set: Whether ``set_result`` was called.
        logs: Printed output, capped at ``CodeLimits.max_output``; a cut is marked in the text.
        error: The end of the traceback if the code failed or was killed, else ``None``.
        limit: The limit that stopped the code (``"wall_time"``, ``"cpu_time"``, ``"memory"``,
            ``"output"``, ``"message_size"``, ``"tool_calls"``, or ``"protocol"`` when the code sent
            the host a message it cannot accept), else ``None``.
        tool_calls: How many tool calls the code made.
        duration: Wall-clock seconds the run took.
    """

    result: Any = None
    result_set: bool = False
    logs: str = ""
    error: str | None = None
    limit: str | None = None
    tool_calls: int = 0
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the code ran to the end without an error."""
        return self.error is None

    def for_model(self) -> str:
        """A compact JSON text for the model: the result, the logs, and the error or a hint."""
        body: dict[str, Any] = {"status": "ok" if self.ok else "error"}
        if self.result_set:
            body["result"] = self.result
        if self.logs:
            body["logs"] = self.logs
        if self.error is not None:
            body["error"] = self.error
            if self.limit is not None:
                body["limit"] = self.limit
        elif not self.result_set:
            body["message"] = _NO_RESULT_HINT
        return json.dumps(body, ensure_ascii=False, default=repr, separators=(",", ":"))


@runtime_checkable
class CodeRunner(Protocol):
    """Runs model-written Python that calls tools; the seam behind the ``execute_code`` meta-tool."""

    name: str

    def describe(self) -> str:
        """What the runner supports, for the ``execute_code`` tool description shown to the model."""
        ...

    async def run(self, code: str, *, call_tool: ToolCaller, limits: CodeLimits | None = None) -> CodeResult:
        """Run ``code`` to the end (or until a limit stops it) and report what happened."""
        ...


class LocalRunner(ABC):
    """What the built-in runners share: their default limits, their description and `run`'s options."""

    name: str
    limits: CodeLimits
    _description: str

    def describe(self) -> str:
        """The ``execute_code`` description of this runner for the model."""
        return self._description

    async def run(
        self,
        code: str,
        *,
        call_tool: ToolCaller,
        limits: CodeLimits | None = None,
        inputs: Mapping[str, Any] | None = None,
    ) -> CodeResult:
        """Run ``code`` under ``limits`` (default: the runner's); see `CodeRunner.run`.

        ``inputs`` (JSON data by name) are bound as global variables before the code runs.

        Raises:
            SandboxError: The sandbox itself could not be started (not a failure of the code).
            OptionalDependencyError: `MontyRunner` without ``pydantic-monty`` installed.
        """
        return await self._run(code, call_tool, limits or self.limits, dict(inputs) if inputs else None)

    @abstractmethod
    async def _run(
        self, code: str, call_tool: ToolCaller, limits: CodeLimits, inputs: dict[str, Any] | None
    ) -> CodeResult:
        """`run` with its options resolved."""


class LogBuffer:
    """Keeps the head and the tail of a stream of text, at most ``limit`` bytes, and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._tail_limit = limit // 4

    def write(self, data: bytes) -> None:
        """Add ``data``; bytes beyond the cap are counted, the last few kept as the tail."""
        self.total += len(data)
        room = self.limit - self._tail_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data and self._tail_limit:
            self._tail += data[-self._tail_limit :]
            del self._tail[: max(0, len(self._tail) - self._tail_limit)]

    def text(self) -> str:
        """The kept text, with ``[... N bytes dropped ...]`` where output was cut."""
        dropped = self.total - len(self._head) - len(self._tail)
        head = self._head.decode("utf-8", "replace")
        if dropped <= 0:
            return head + self._tail.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        return f"{head}\n[... {dropped} bytes of output dropped ...]\n{tail}"
