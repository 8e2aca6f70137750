"""The shell launcher: confines itself, then replaces itself with ``sh -c COMMAND``.

Run as a script (``python -I -S -B _shell_child.py STATUS_FD CONFIG_JSON``) by `ShellTools`, never
imported by toolplan. Every confinement layer is applied here, before ``execve``, and is inherited
by the shell and everything it starts: rlimits, no capabilities, Landlock (read and execute system
directories, read and write the workspace, nothing else; no TCP), seccomp (no sockets, ptrace,
namespaces or mounts; no leaving the process group the host kills as a whole). A required layer the
kernel does not offer stops the launch: the command is never run unconfined.

The launcher reports on STATUS_FD (close-on-exec, so the host sees it close when the shell starts):
one JSON line ``{"ok": true, "layers": [...]}`` before ``execve``, or ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out
import _confine  # type: ignore[import-not-found,unused-ignore]

REFUSED = 125  # the exit status of a launch that did not run the command


def _threads_of(uid: int) -> int:
    """How many tasks (threads) the user ``uid`` runs now: what ``RLIMIT_NPROC`` is counted against."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 0").split()[0]) == uid:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def _confine_self(config: dict[str, Any]) -> list[str]:
    processes = int(config["processes"])
    uid = os.getuid()
    if uid != 0:  # root is never held to RLIMIT_NPROC: the wall-time kill of the group bounds it instead
        processes += _threads_of(uid)
    layers: list[str] = _confine.confine(
        workspace=config["workspace"],
        read_only=config["read_only"],
        read_write=config["read_write"],
        executable=config["executable"],
        allow_network=False,
        mount_namespace=bool(config["mount_namespace"]),
        memory=int(config["memory"]),
        cpu_seconds=int(config["cpu_seconds"]),
        open_files=int(config["open_files"]),
        file_size=int(config["file_size"]),
        processes=processes,
        device_nodes=False,
    )
    return layers


def main(argv: list[str]) -> int:
    status = int(argv[1])
    config: dict[str, Any] = json.loads(argv[2])

    def report(message: dict[str, Any]) -> None:
        os.write(status, (json.dumps(message) + "\n").encode())

    try:
        layers = _confine_self(config)
        missing = [layer for layer in config["require"] if layer not in layers]
        if missing:
            report({"ok": False, "error": f"this machine does not offer {', '.join(missing)}", "layers": layers})
            return REFUSED
        report({"ok": True, "layers": layers})
        os.set_inheritable(status, False)  # closes at execve: the host's sign that the shell runs
        shell = config["shell"]
        os.execve(shell, [os.path.basename(shell), "-c", config["command"]], config["env"])
    except BaseException as exc:  # nothing may run after a failure to confine
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        try:
            report({"ok": False, "error": detail})
        finally:
            os._exit(REFUSED)


if __name__ == "__main__":
    code = REFUSED
    try:
        code = main(sys.argv)
    finally:
        os._exit(code)
