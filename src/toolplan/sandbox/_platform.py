"""What confinement the platform offers, probed once per process."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from .._errors import SandboxError

__all__ = ("SHELL_LAUNCHER", "landlock_abi", "namespace_prefix", "prefix_layers", "sandbox_prefix")

SHELL_LAUNCHER = Path(__file__).with_name("_shell_child.py")
"""The script `ShellTools` runs to confine itself before it becomes the shell (it imports `_confine`)."""

_prefixes: dict[tuple[bool, bool], tuple[str, ...]] = {}


async def _works(argv: tuple[str, ...]) -> bool:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            "true",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return False
    return await proc.wait() == 0


async def namespace_prefix(*, net: bool, mount: bool) -> tuple[str, ...]:
    """A command prefix running its command in new (empty network and/or private mount) namespaces, or ``()``.

    As root ``unshare [--net] [--mount]``; otherwise with ``--map-root-user`` (unprivileged user
    namespaces). ``unshare --mount`` makes mount propagation private. Cached per process.
    """
    key = (net, mount)
    if key in _prefixes:
        return _prefixes[key]
    unshare = shutil.which("unshare")
    flags = (*(("--net",) if net else ()), *(("--mount",) if mount else ()))
    found: tuple[str, ...] = ()
    if unshare is not None and flags:
        candidates: list[tuple[str, ...]] = []
        if os.geteuid() == 0:
            candidates.append((unshare, *flags, "--"))
        candidates.append((unshare, "--map-root-user", *flags, "--"))
        for argv in candidates:
            if await _works(argv):
                found = argv
                break
    _prefixes[key] = found
    return found


async def sandbox_prefix(*, network: bool | None, mount: bool | None, what: str) -> tuple[str, ...]:
    """The ``unshare`` prefix of a sandbox child: a private mount namespace and an empty network one.

    The mount namespace is where the child makes every mount but its workspace read-only
    (``_confine.read_only_root``); the network namespace leaves it only a down loopback. Each is
    ``None``: used where the platform allows it, ``True``: required (`SandboxError` naming ``what``
    when unavailable), ``False``: not used. Shared by `SubprocessRunner` and `ShellTools`.
    """
    net = network is not False
    prefix: tuple[str, ...] = ()
    if mount is not False:
        prefix = await namespace_prefix(net=net, mount=True)
    if not prefix and net:
        prefix = await namespace_prefix(net=True, mount=False)
    if mount and "--mount" not in prefix:
        raise SandboxError(
            f"{what} needs a private mount namespace (mount_namespace=True) but `unshare --mount` is not "
            "permitted here; run as root or allow unprivileged user namespaces, or pass mount_namespace=None."
        )
    if network and "--net" not in prefix:
        raise SandboxError(
            f"{what} needs an empty network namespace (network_namespace=True) but `unshare --net` is "
            "not permitted here; run as root or allow unprivileged user namespaces, or pass "
            "network_namespace=None (seccomp still refuses sockets)."
        )
    return prefix


def prefix_layers(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """The layers a prefix from `sandbox_prefix` gives (``netns``), as the children report theirs."""
    return ("netns",) if "--net" in prefix else ()


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (0: none).

    Imports the confinement module only when asked, as the sandbox children do (it loads libc).
    """
    from . import _confine

    return _confine.landlock_abi()
