"""The in-interpreter guard of the sandbox child: a `sys.addaudithook` hook.

It refuses process creation, ctypes, sockets, signals and file access outside the workspace with
messages the model can act on. It is NOT a security boundary: CPython's audit hooks see only what
the interpreter reports, and code that corrupts interpreter memory, or finds an unaudited path, is not
stopped by it. The kernel layers (`_confine`: Landlock, seccomp, rlimits; the network namespace) are
the boundary; this hook makes refusals clear and is the fallback where the kernel offers nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ("make_hook",)

_HINT = "Code mode runs without processes, ctypes or network; use call_tool(...) to reach the outside world."
_BLOCKED_EVENTS = {
    "os.system": "running shell commands (os.system)",
    "os.exec": "replacing the process (os.exec*)",
    "os.spawn": "starting processes (os.spawn*)",
    "os.posix_spawn": "starting processes (os.posix_spawn)",
    "os.fork": "forking",
    "os.forkpty": "forking",
    "subprocess.Popen": "starting processes (subprocess)",
    "os.kill": "sending signals",
    "os.killpg": "sending signals",
    "signal.pthread_kill": "sending signals",
    "gc.get_objects": "inspecting the interpreter's objects",
    "gc.get_referrers": "inspecting the interpreter's objects",
    "gc.get_referents": "inspecting the interpreter's objects",
    "sys.remote_exec": "attaching to processes",
}
_BLOCKED_MODULES = frozenset(
    {"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters", "_testcapi", "_testinternalcapi", "cffi"}
)
_READ_EVENTS = {"os.listdir": (0,), "os.scandir": (0,), "os.chdir": (0,)}
_WRITE_EVENTS = {
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def make_hook(
    workspace: str, read_roots: tuple[str, ...], allow_network: bool
) -> Callable[[str, tuple[Any, ...]], None]:
    """Build the hook. ``workspace`` is read-write, ``read_roots`` read-only, the rest refused."""
    writable = (os.path.realpath(workspace),)
    readable = writable + tuple(os.path.realpath(r) for r in read_roots)
    local = threading.local()

    def resolve(path: Any) -> str | None:
        if isinstance(path, int) or path is None:
            return None  # an already-open descriptor: its opening was checked
        raw = os.fspath(path)
        text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
        return os.path.realpath(os.path.join(os.getcwd(), text))

    def check(path: Any, write: bool) -> None:
        real = resolve(path)
        if real is None or _within(real, writable if write else readable):
            return
        verb = "writing" if write else "reading"
        raise PermissionError(
            f"Sandbox: {verb} {os.fspath(path)!r} is not allowed. Only the workspace (the current "
            f"directory, {writable[0]}) can be {'written' if write else 'read'}; "
            "use call_tool(...) for data from elsewhere."
        )

    def refuse(what: str) -> None:
        raise PermissionError(f"Sandbox: {what} is not allowed. {_HINT}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            _dispatch(event, args)
        finally:
            local.busy = False

    def _dispatch(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (*args, None, None)[:3]
            write = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
            check(path, write)
        elif event in _BLOCKED_EVENTS:
            refuse(_BLOCKED_EVENTS[event])
        elif event.startswith("ctypes."):
            refuse("ctypes")
        elif event == "import" and args and str(args[0]).split(".")[0] in _BLOCKED_MODULES:
            refuse(f"importing {args[0]!r}")
        elif event.startswith("socket.") and not allow_network:
            refuse("network access (sockets)")
        elif event in _READ_EVENTS:
            for i in _READ_EVENTS[event]:
                check(args[i] if len(args) > i else None, write=False)
        elif event in _WRITE_EVENTS:
            for i in _WRITE_EVENTS[event]:
                check(args[i] if len(args) > i else None, write=True)

    return hook
