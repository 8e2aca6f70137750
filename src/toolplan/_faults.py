"""Fault points for crash tests of durable runs, chosen by the ``TOOLPLAN_FAULTS`` environment variable.

``TOOLPLAN_FAULTS="after_call=7"`` kills the process (SIGKILL: no cleanup, like a power cut of the
process) the 7th time a durable run passes the point ``after_call``; several are separated by
commas. Points: ``after_claim`` (a step's ``running`` row committed, its tool not yet called),
``after_call`` (the tool returned, its result not yet committed), ``after_commit`` (the result
committed, no dependent called yet; a dependent that became ready may already have its ``running``
row committed in that same transaction, so a resume treats it as in flight), and ``commit_error``,
which instead makes that commit fail once with a database error (the store retries it). Unset,
`ACTIVE` is False and no point costs anything: callers test it first.
"""

from __future__ import annotations

import os
import signal

__all__ = ("ACTIVE", "POINTS", "fails", "hit")

POINTS = frozenset({"after_claim", "after_call", "after_commit", "commit_error"})


def _parse(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, _, count = part.partition("=")
        name = name.strip()
        if name not in POINTS or not count.strip().isdigit() or int(count) < 1:
            raise SystemExit(
                f"TOOLPLAN_FAULTS: {part.strip()!r} is not POINT=N with N >= 1 and POINT one of {sorted(POINTS)}."
            )
        out[name] = int(count)
    return out


_AT = _parse(os.environ.get("TOOLPLAN_FAULTS", ""))
_SEEN: dict[str, int] = dict.fromkeys(_AT, 0)
ACTIVE = bool(_AT)


def _count(point: str) -> bool:
    at = _AT.get(point)
    if at is None:
        return False
    _SEEN[point] += 1
    return _SEEN[point] == at


def hit(point: str) -> None:
    """Kill this process with SIGKILL if ``point`` is passed for the chosen time."""
    if _count(point):
        os.kill(os.getpid(), signal.SIGKILL)


def fails(point: str) -> bool:
    """True once, when ``point`` (``commit_error``) is passed for the chosen time."""
    return _count(point)
