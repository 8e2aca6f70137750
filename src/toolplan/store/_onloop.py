"""PostgreSQL: a turn's writes committed from the event loop itself, with no hop to the database thread.

When the database thread is idle (nothing handed to it is pending) and no lease of the batch's runs
is due, the writes of a turn of the event loop go to the server from the loop: as one pipeline of
prepared statements (`Prepared`: parsed and planned once per connection) ended by a sync, which
PostgreSQL runs as one implicit transaction, committed at the sync and rolled back whole if any
statement fails. The loop sends it on the thread's own connection (which it holds, as the thread
does, through the database's ``_busy`` lock) and is woken by the socket when the answer is in: a
chain step's commit is one round trip that wakes no thread, and no thread wakes the loop.

Writes of later turns of the same loop, made while a query is in flight, wait behind it and go
together in the next one (a group commit). Anything else goes to the thread as before: a batch
with a lease to renew, one too large, and any batch whose query failed (the thread tries it again,
with its waits between tries, and reports what still fails), so every promise of the thread's
path holds. A query left in flight by a loop that stopped is finished by the thread (`rescue`).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import threading
import time
from typing import Any, Protocol

from .. import _faults
from .._errors import StoreError
from ._prepared import Call, Prepared
from ._writes import Done, Write, WriteCounts, complete, settle

__all__ = ("OnLoop",)

_MAX_STATEMENTS = 256  # a larger batch goes to the thread
_IDLE = 0  # pq.TransactionStatus.IDLE: no transaction open on the connection
_OK = (1, 2)  # pq.ExecStatus.COMMAND_OK, TUPLES_OK: a command's result that is no error
_SQLSTATE = ord("C")  # pq.DiagnosticField.SQLSTATE
_SYNC = 10  # pq.ExecStatus.PIPELINE_SYNC: the end of a pipeline's results


class Database(Protocol):
    """What `OnLoop` uses of its `toolplan.store._db.Database`."""

    lease: float
    counts: WriteCounts
    _raw: Any  # the thread's connection (psycopg), None until the database is open
    _literals: Any  # None unless PostgreSQL
    _busy: threading.Lock  # held by whoever uses the connection
    _pending: int  # what was handed to the thread and is not done yet

    def _put(self, item: Any) -> None: ...


class OnLoop:
    """The database's commits from an event loop (PostgreSQL only); the query in flight is guarded by ``_lock``."""

    __slots__ = (
        "_behind",
        "_db",
        "_expect",
        "_failed",
        "_fd",
        "_flying",
        "_got",
        "_live",
        "_lock",
        "_loop",
        "_now",
        "_statements",
    )

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()  # who finishes the query in flight: its loop, or the thread (`rescue`)
        self._flying: list[Write] | None = None  # the batch whose query is in flight
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop that sent it
        self._behind: list[Write] = []  # that loop's later writes, for the next query
        self._fd = -1
        self._now = 0.0
        self._statements = Prepared()  # the statements prepared on the connection, by text and parameter types
        self._expect: list[tuple[bytes, bool]] = []  # the commands in flight: a statement's name, and if prepared
        self._got = 0  # the results read so far
        self._live: set[int] = set()  # the writes in flight whose run was not broken when sent
        self._failed = False  # one of them was an error (the pipeline rolled back)

    def send(self, batch: list[Write], loop: asyncio.AbstractEventLoop) -> bool:
        """Commit ``batch`` from ``loop`` (True), or leave it to the caller to hand to the thread (False)."""
        if self._flying is not None:
            if self._loop is loop:
                self._behind.extend(batch)
                return True
            return False
        return self._start(batch, loop)

    def take_behind(self) -> list[Write]:
        """The writes waiting behind the query in flight, taken (the store is stopping: the thread writes them)."""
        behind, self._behind = self._behind, []
        return behind

    def _start(self, batch: list[Write], loop: asyncio.AbstractEventLoop) -> bool:
        db = self._db
        raw = db._raw
        if raw is None or db._literals is None or sum(len(w.statements) for w in batch) > _MAX_STATEMENTS:
            return False
        if not db._busy.acquire(blocking=False):
            return False
        sent = False
        try:
            if db._pending:  # an earlier write is still the thread's: these commit after it
                return False
            now = time.time()
            third = db.lease / 3
            live = [w for w in batch if w.writer.broken is None]
            if any(not w.writer.creating and now - w.writer.renewed_at >= third for w in live):
                return False  # a lease to renew: the thread renews and checks it in its transaction
            calls = self._statements.calls([s for w in live for s in w.statements], raw)
            pgconn = raw.pgconn
            if not calls or pgconn.transaction_status != _IDLE:
                return False  # nothing to write, a value to leave to psycopg, or a transaction open
            if _faults.ACTIVE and _faults.fails("commit_error"):
                return False  # the thread's try comes next, as after a failed commit
            sent = True
            self._live = {id(w) for w in live}
            self._send(pgconn, calls)
            self._fd = pgconn.socket
            self._flying, self._loop, self._now = batch, loop, now
            if pgconn.flush():  # not all of it went out yet
                loop.add_writer(self._fd, self._writable)
            loop.add_reader(self._fd, self._readable)
        except Exception:
            if not sent:
                return False
            self._flying = self._loop = None  # the connection is in an unknown state: the thread finds out
            db._busy.release()
            db._put(batch)
            return True
        finally:
            if not sent:
                db._busy.release()
        return True

    def _send(self, pgconn: Any, calls: list[Call]) -> None:
        """The statements in one pipeline, each prepared on first use, then a sync: one implicit transaction."""
        expect: list[tuple[bytes, bool]] = []
        self._expect, self._got, self._failed = expect, 0, False
        pgconn.enter_pipeline_mode()
        for name, text, types, values in calls:
            if text is not None:
                pgconn.send_prepare(name, text, types)
                expect.append((name, True))
            pgconn.send_query_prepared(name, values)
            expect.append((name, False))
        pgconn.pipeline_sync()

    def _writable(self) -> None:
        with self._lock:
            if self._flying is None or self._loop is None:
                return
            try:
                done = self._db._raw.pgconn.flush() == 0
            except Exception:
                done = True  # the read finds the failure
            if done:
                self._loop.remove_writer(self._fd)

    def _readable(self) -> None:
        with self._lock:
            batch, loop = self._flying, self._loop
            if batch is None or loop is None:
                return
            committed = self._read()
            if committed is None:
                return  # more of the answer to come
            loop.remove_reader(self._fd)
            loop.remove_writer(self._fd)
            self._flying = self._loop = None
            done, behind = self._finish(batch, committed)
        settle(done)  # on this loop: its own futures
        if behind and not self._start(behind, loop):
            self._db._put(behind)

    def _read(self) -> bool | None:
        """Read what the server sent: None while the answer is incomplete, else whether the batch committed."""
        pgconn = self._db._raw.pgconn
        try:
            pgconn.consume_input()
            while not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:
                    continue  # between two commands' results
                status = result.status
                if status == _SYNC:  # the pipeline's end: committed, unless a command failed
                    pgconn.exit_pipeline_mode()
                    return not self._failed and self._got == len(self._expect)
                name, prepare = self._expect[self._got] if self._got < len(self._expect) else (b"", False)
                self._got += 1
                if status in _OK:
                    if prepare:  # a session's, not the transaction's: kept even if the pipeline fails
                        self._statements.known([name])
                    continue
                self._failed = True
                self._statements.failed(name, prepare, result.error_field(_SQLSTATE))
        except Exception:  # the connection failed: the thread finds out, and retries
            if pgconn.pipeline_status:
                with contextlib.suppress(Exception):
                    pgconn.exit_pipeline_mode()
            return False
        return None

    def _finish(self, batch: list[Write], committed: bool) -> tuple[Done, list[Write]]:
        """Release the connection; the futures to complete, and the writes waiting behind the batch.

        A batch that did not commit goes to the thread, with everything behind it, after it: the
        thread tries it again and reports what still fails.
        """
        db = self._db
        behind, self._behind = self._behind, []
        if not committed:
            db._busy.release()
            db._put(batch + behind)
            return [], []
        counts = db.counts
        counts.round_trips += 1
        counts.commits += 1
        for w in batch:
            if w.statements and w.writer.creating:  # its rows exist now, with a fresh lease
                w.writer.creating = False
                w.writer.renewed_at = self._now
        db._busy.release()
        done: Done = []
        for w in batch:
            if w.future is not None:
                failure = None if id(w) in self._live else StoreError(w.writer.broken or "")
                done.append((w.future, failure, None))
        return done, behind

    def rescue(self) -> None:
        """On the thread, waiting for the connection: finish a query whose loop has stopped.

        A loop that stopped (or closed) with a query in flight would never read its answer: the
        thread reads it here, and the writes of that loop still waiting go to the thread's queue.
        """
        with self._lock:
            batch, loop = self._flying, self._loop
            if batch is None or loop is None or loop.is_running():
                return
            pgconn: Any = self._db._raw.pgconn
            committed: bool | None = None
            while committed is None:
                try:
                    flushed = pgconn.flush() == 0
                except Exception:
                    flushed = True
                select.select([self._fd], [] if flushed else [self._fd], [], 1.0)
                committed = self._read()
            if not loop.is_closed():
                loop.remove_reader(self._fd)
                loop.remove_writer(self._fd)
            self._flying = self._loop = None
            done, behind = self._finish(batch, committed)
        if done:
            complete(loop, done)
        if behind:
            self._db._put(behind)
