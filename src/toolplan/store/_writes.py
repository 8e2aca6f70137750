"""What the store's write path hands around: statements, writers, queued writes, their counts, and their completion."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ("Done", "Statement", "Write", "WriteCounts", "Writer", "complete", "settle")


Statement = tuple[str, Sequence[Any]]


class Writer(Protocol):
    """A run's journal as the database thread sees it."""

    run_id: str
    owner: str
    broken: str | None
    creating: bool  # its rows are being created in its first transaction: no lease to check yet
    renewed_at: float  # when its lease was last renewed (time.time), by a transaction that committed

    def lease_statement(self, until: float, now: float) -> Statement:
        """The fenced lease renewal (with the run's latest counters)."""
        ...


@dataclass(slots=True)
class Write:
    """Statements of one writer, queued; ``future`` (of ``loop``) is done once they have committed."""

    writer: Writer
    statements: list[Statement]
    future: asyncio.Future[None] | None
    loop: asyncio.AbstractEventLoop | None


@dataclass(slots=True)
class WriteCounts:
    """What the write path of a `Database` has done so far (read by ``python -m bench durable``).

    Attributes:
        commits: Transactions of journal writes committed (a group commit counts once).
        round_trips: Client-server exchanges those transactions took (PostgreSQL: each wait for the
            server's answer; SQLite, in-process, counts none).
        wakeups: Hand-offs from the database thread to an event loop (one per loop per batch).
    """

    commits: int = 0
    round_trips: int = 0
    wakeups: int = 0


Done = list[tuple[asyncio.Future[Any], BaseException | None, Any]]


def settle(done: Done) -> None:
    """On the futures' loop: give each future of ``done`` its error, or its value (one already done is left)."""
    for future, error, value in done:
        if future.done():
            continue
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
            future.exception()  # marked seen: a failed write nobody awaits fails its run (`Writer.broken`)


def complete(loop: asyncio.AbstractEventLoop, done: Done) -> None:
    """`settle` ``done`` on ``loop`` from another thread (nothing if the loop has closed)."""
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(settle, done)
