"""What confinement the platform offers, probed once per process."""

from __future__ import annotations

import asyncio
import os
import shutil

__all__ = ("namespace_prefix", "network_namespace_prefix")

_netns: tuple[str, ...] | None = None
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


async def network_namespace_prefix() -> tuple[str, ...]:
    """A command prefix that runs its command in a new, empty network namespace, or ``()``.

    As root ``unshare --net``; otherwise ``unshare --map-root-user --net`` (needs unprivileged user
    namespaces). The answer is cached for the life of the process.
    """
    global _netns
    if _netns is not None:
        return _netns
    unshare = shutil.which("unshare")
    found: tuple[str, ...] = ()
    candidates: list[tuple[str, ...]] = []
    if unshare is not None:
        if os.geteuid() == 0:
            candidates.append((unshare, "--net", "--"))
        candidates.append((unshare, "--map-root-user", "--net", "--"))
        for argv in candidates:
            if await _works(argv):
                found = argv
                break
    _netns = found
    return found


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
