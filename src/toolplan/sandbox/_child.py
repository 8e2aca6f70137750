"""The sandbox child: confines itself, then runs model code with ``call_tool`` and friends.

Run as a script (``python -I -S -B _child.py FD``) by `SubprocessRunner`, never imported by
toolplan. FD is one end of a socketpair to the host; the host's first message holds the code, limits and paths. Messages
both ways are a 4-byte big-endian length and a UTF-8 JSON object.

Order matters: import what the code may need, apply the kernel layers (``_confine.confine``, the
same code that confines the shell: rlimits, a read-only root, no capabilities, Landlock, seccomp;
irreversible), then install the audit hook (in-interpreter guard with readable error messages), then
run the code. Printed output goes to stdout/stderr, which the host reads and caps.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out
import _confine  # type: ignore[import-not-found,unused-ignore]

_FILENAME = "<code>"
_HEADER = struct.Struct(">I")


class ToolCallError(RuntimeError):
    """A tool called from the code failed; ``tool``, ``code`` and ``message`` say how."""

    def __init__(self, tool: str, message: str, code: str = "tool_error") -> None:
        super().__init__(f"Tool {tool!r} failed: {message}")
        self.tool = tool
        self.code = code
        self.message = message


class _Channel:
    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._lock = threading.Lock()
        self._next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, allow_nan=False).encode()
        self._sock.sendall(_HEADER.pack(len(data)) + data)

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise SystemExit("The host closed the channel.")
            chunks += chunk
        return bytes(chunks)

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            message["id"] = self._next_id
            self.send(message)
            return self.recv()

    def recv(self) -> dict[str, Any]:
        (size,) = _HEADER.unpack(self._recv_exact(_HEADER.size))
        message: dict[str, Any] = json.loads(self._recv_exact(size))
        return message


_max_depth = 100  # the host's bound (sent in its first message); the host checks again


def _check_json(value: Any, what: str) -> None:
    """Raise in the code, where it can be caught, what the host would refuse and kill the code for."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable (dict, list, str, number, bool, None): {exc}") from None
    except RecursionError:
        raise TypeError(f"{what} must be JSON-serialisable: it is nested far too deep.") from None
    level = [value] if isinstance(value, dict | list | tuple) else []
    for _ in range(_max_depth):  # json.dumps succeeded, so the value is finite and acyclic
        if not level:
            return
        children = (c for item in level for c in (item.values() if isinstance(item, dict) else item))
        level = [c for c in children if isinstance(c, dict | list | tuple)]
    if not level:
        return
    raise TypeError(f"{what} must be JSON-serialisable: it is nested more than {_max_depth} levels deep.")


def _outcome(reply: dict[str, Any], tool: str) -> Any:
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error") or {}
    return ToolCallError(tool, str(error.get("message", "unknown error")), str(error.get("code", "tool_error")))


def _make_api(channel: _Channel) -> dict[str, Any]:
    def call_tool(name: str, args: dict[str, Any] | None = None) -> Any:
        """Call tool ``name`` with keyword ``args``; returns its value or raises ToolCallError."""
        if not isinstance(name, str):
            raise TypeError(f"call_tool: the tool name must be a string, got {type(name).__name__}.")
        if args is not None and not isinstance(args, dict):
            raise TypeError(f"call_tool({name!r}, args): args must be a dict or None.")
        _check_json(args, "call_tool arguments")
        outcome = _outcome(channel.request({"op": "call", "tool": name, "args": args or {}}), name)
        if isinstance(outcome, ToolCallError):
            raise outcome
        return outcome

    def call_tools_parallel(calls: Sequence[Any]) -> list[Any]:
        """Run ``[(name, args), ...]`` concurrently; results in input order, ToolCallError for failures."""
        batch: list[list[Any]] = []
        for call in calls:
            name, args = (call, None) if isinstance(call, str) else tuple(call)
            if not isinstance(name, str) or (args is not None and not isinstance(args, dict)):
                raise TypeError("call_tools_parallel expects a list of (name, args_dict) pairs.")
            _check_json(args, "call_tools_parallel arguments")
            batch.append([name, args or {}])
        reply = channel.request({"op": "parallel", "calls": batch})
        if not reply.get("ok", True):
            raise _outcome(reply, "call_tools_parallel")
        return [_outcome(r, name) for r, (name, _) in zip(reply["results"], batch, strict=True)]

    def set_result(value: Any) -> None:
        """Return ``value`` (JSON-serialisable) to the caller; the last call wins."""
        _check_json(value, "set_result(value)")
        channel.send({"op": "result", "value": value})

    return {"call_tool": call_tool, "call_tools_parallel": call_tools_parallel, "set_result": set_result}


def _format_error(exc: BaseException, max_lines: int = 12) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _FILENAME]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(["Traceback (most recent call last):", *text[-max_lines:]])


def _install_audit_hook(workspace: str, read_roots: tuple[str, ...], allow_network: bool) -> None:
    from _guard import make_hook  # type: ignore[import-not-found,unused-ignore]

    sys.addaudithook(make_hook(workspace, read_roots, allow_network))


def main(argv: list[str]) -> int:
    global _max_depth
    _confine.die_with_parent()  # first: a host killed from now on takes the code with it
    channel = _Channel(int(argv[1]))
    config = channel.recv()
    _max_depth = int(config.get("max_depth", _max_depth))
    api = _make_api(channel)
    workspace: str = config["workspace"]
    read_roots = tuple(config["read_roots"])
    allow_network = bool(config["allow_network"])
    import _guard  # type: ignore[import-not-found,unused-ignore]  # noqa: F401  (before Landlock)

    layers = _confine.confine(
        workspace=workspace,
        read_only=read_roots,
        read_write=(workspace,),
        allow_network=allow_network,
        mount_namespace=bool(config.get("mount_namespace", False)),
        memory=config["memory"],
        cpu_seconds=config["cpu_seconds"],
        open_files=config["open_files"],
        file_size=config["file_size"],
        landlock=config.get("landlock", True),
        seccomp=config.get("seccomp", True),
    )
    if missing := [layer for layer in config.get("require", ()) if layer not in layers]:
        raise RuntimeError(f"this machine does not offer {', '.join(missing)} (layers: {', '.join(layers)})")
    if config.get("audit_hook", True):
        _install_audit_hook(workspace, read_roots, allow_network)
        layers.append("audit_hook")
    for name in ("ctypes", "_ctypes", "_confine", "_guard"):
        sys.modules.pop(name, None)
    channel.send({"op": "ready", "layers": layers})

    source: str = config["code"]
    linecache.cache[_FILENAME] = (len(source), None, source.splitlines(True), _FILENAME)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins, **api}
    namespace["ToolCallError"] = ToolCallError
    namespace.update(config.get("inputs") or {})  # names checked by the host (identifiers, not the API's)
    error: str | None = None
    kind: str | None = None
    try:
        exec(compile(source, _FILENAME, "exec"), namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error, kind = f"SystemExit: {exc.code}", "SystemExit"
    except BaseException as exc:  # the code's failure is the result, whatever it is
        error, kind = _format_error(exc), type(exc).__name__
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send({"op": "done", "error": error, "kind": kind})
    return 0


def run_main(entry: Callable[[list[str]], int]) -> None:
    """Run ``entry``; a failure to even start the sandbox is reported on stderr with exit code 3."""
    try:
        code = entry(sys.argv)
    except BaseException:
        traceback.print_exc()
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run_main(main)
