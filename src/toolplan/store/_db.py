"""The store's database thread: every database call of one store runs on it, and writes are group-committed.

Durable runs put their writes on a queue; the thread takes everything queued, writes it in one
transaction (renewing, and checking, each run's lease in it), commits, and only then completes the
writers' futures. So a tick of the scheduler that starts or ends many steps costs one commit, and
nothing is reported as written before it is. A failed transaction is retried whole; a write that
still fails completes its future with `StoreError` and ends its run's journal (later writes of that
run are refused, so its event numbers never have a gap).

The writes of one turn of the event loop are gathered first and committed at its end in one
transaction, handed to the thread in one piece; on SQLite, on the loop itself when the thread is
idle and the batch is small (a WAL commit with synchronous=NORMAL writes no fsync, and there the
connection waits for no other process's lock: it fails at once and the thread takes the batch). On
PostgreSQL, from the loop too when the thread is idle and no lease is due (`OnLoop`: a pipeline of
prepared statements and a sync, one round trip); the thread sends a transaction with its commit as
one query (one round trip).

Blocking database calls never run on the event loop: async callers wait on futures.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import _faults
from .._errors import RunConflictError, StoreError, ToolplanError
from ._literals import Literals
from ._onloop import OnLoop
from ._writes import Statement, Write, WriteCounts, Writer, complete

__all__ = ("Database", "Statement", "WriteCounts", "Writer")


_RETRIES = (0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)  # waits between tries of a failed transaction
_TRIES = (*_RETRIES, None)  # each try's wait before the next (None: the last)
_CHECKPOINT_IDLE = 1.0  # seconds without writes after which SQLite's WAL is checkpointed (a pause between runs)
_CHECKPOINT_EVERY = 2000  # commits after which it is checkpointed anyway
_INLINE_MAX = 64  # SQLite: at most this many statements of a turn of the event loop are committed on the loop


@dataclass(slots=True)
class _Call:
    fn: Callable[[sa.Engine, Any], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


_STOP = object()
_POKE = object()  # SQLite: the loop committed: the thread re-arms its checkpoint


class Database:
    """One database (an SQLAlchemy engine) and the thread that uses it."""

    def __init__(self, engine: sa.Engine, *, lease: float, opener: Callable[[sa.Engine], None]) -> None:
        self.engine = engine
        self.lease = lease
        self.qmark = engine.dialect.paramstyle == "qmark"
        self._opener = opener
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writers: dict[int, Writer] = {}  # open journals, by id(): their leases are renewed
        self._uncheckpointed = 0  # SQLite commits since the last checkpoint
        dbapi = engine.dialect.loaded_dbapi
        self._driver_error: type[Exception] = getattr(dbapi, "Error", sa.exc.SQLAlchemyError)  # the driver's own
        self._integrity_error: type[Exception] = getattr(dbapi, "IntegrityError", sa.exc.IntegrityError)
        self._fairy: Any = None  # the pool's connection for the write path
        self._raw: Any = None  # its driver connection (sqlite3, psycopg): the write path uses it directly
        self._thread: threading.Thread | None = None
        self._literals: Literals | None = None  # PostgreSQL: values as SQL literals (`_write_at_once`)
        self._lock = threading.Lock()
        self.closed = False
        # SQLite: a turn of an event loop's writes, committed at its end on the loop when the thread
        # is idle (`_end_turn`); the thread holds ``_busy`` while it uses the connection, and
        # ``_pending`` counts what was handed to it and is not done yet (kept under ``_plock``).
        self._turns: dict[asyncio.AbstractEventLoop, list[Write]] = {}
        self._busy = threading.Lock()
        self._plock = threading.Lock()
        self._pending = 0
        self.counts = WriteCounts()
        self._onloop = OnLoop(self)  # PostgreSQL: a turn's writes committed from its loop

    # -- from the event loop (or any thread) -----------------------------------------------------

    def sql(self, text: str) -> str:
        """``text`` written with ``?`` placeholders, in the driver's style."""
        return text if self.qmark else text.replace("?", "%s")

    def _start(self) -> None:
        with self._lock:
            if self.closed:
                raise StoreError("The store is closed; open it again with open_store(url).")
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, name="toolplan-store", daemon=True)
                self._thread.start()

    def write(self, writer: Writer, statements: list[Statement], future: asyncio.Future[None] | None = None) -> None:
        """Queue ``statements`` for the next transaction; ``future`` (of the running loop) is done once committed.

        The writes of one turn of the event loop are gathered and, at the turn's end, committed in
        one transaction (`_end_turn`).
        """
        self._start()
        loop = future.get_loop() if future is not None else None
        item = Write(writer, statements, future, loop)
        if loop is None:
            self._put(item)
            return
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = []
            if self.qmark:
                loop.call_soon(self._end_turn, loop)
            else:  # PostgreSQL: the next turn's writes join too (steps a tick started write theirs in it)
                loop.call_soon(loop.call_soon, self._end_turn, loop)
        turn.append(item)

    def _put(self, item: Any) -> None:
        with self._plock:
            self._pending += 1
        self._queue.put(item)

    def _end_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """At the end of a turn of ``loop``: hand its writes to the thread in one piece, or (SQLite) commit them here.

        Here when the thread is idle (nothing handed to it is pending, so no earlier write can
        commit after these) and the batch is small: a commit in WAL mode with synchronous=NORMAL
        writes the WAL file without an fsync, and the connection is asked not to wait for a lock
        (another process writing): then, or on any failure, the batch goes to the thread, which
        waits and retries as usual. A chain step's commit then wakes no thread and no loop.
        """
        batch = self._turns.pop(loop, None)
        if not batch:
            return
        if self.closed:
            for w in batch:
                if w.future is not None and not w.future.done():
                    w.future.set_exception(StoreError("The store was closed."))
                    w.future.exception()
            return
        if not (self._inline(batch) if self.qmark else self._onloop.send(batch, loop)):
            self._put(batch)

    def _inline(self, batch: list[Write]) -> bool:
        raw = self._raw
        if raw is None or sum(len(w.statements) for w in batch) > _INLINE_MAX:
            return False
        if not self._busy.acquire(blocking=False):
            return False
        try:
            if self._pending:  # an earlier write is still the thread's: these commit after it
                return False
            live = [w for w in batch if w.writer.broken is None]
            try:  # the connection does not wait for a lock here (`_patient`)
                lost = self._transaction(live) if live else {}
            except Exception:
                self._rollback()
                return False
            poke = self._uncheckpointed == 1 or self._uncheckpointed >= _CHECKPOINT_EVERY
        finally:
            self._busy.release()
        if poke:
            self._queue.put(_POKE)
        for w in batch:
            future = w.future
            if future is None or future.done():
                continue
            broken = w.writer.broken
            failure = lost.get(id(w.writer)) if w in live else StoreError(broken or "")
            if failure is None:
                future.set_result(None)
            else:
                future.set_exception(failure)
                future.exception()
        return True

    async def call(self, fn: Callable[[sa.Engine, Any], Any]) -> Any:
        """Run ``fn(engine, raw_connection)`` on the database thread and return its result."""
        self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._put(_Call(fn, future, loop))
        return await future

    async def read(self, fn: Callable[[sa.Engine], Any]) -> Any:
        """Run the read-only ``fn(engine)`` on a worker thread, with a pooled connection of its own.

        Reads go beside the database thread, not behind its queue of writes: a service answering
        status reads while its executions commit does both at once. Until the database is open (its
        schema checked), a read goes through the database thread, which opens it.
        """
        if not self.opened:
            return await self.call(lambda engine, _raw: fn(engine))
        try:
            return await asyncio.to_thread(fn, self.engine)
        except ToolplanError:
            raise
        except Exception as exc:  # the database failed, or holds something no toolplan wrote
            raise StoreError(f"The store failed: {_describe(exc)}") from exc

    async def transact(self, fn: Callable[[sa.Engine], Any]) -> Any:
        """Run ``fn(engine)``, a transaction of its own that no journal write waits behind.

        On PostgreSQL it runs on a worker thread with a pooled connection, beside the database
        thread, so independent transactions (a service's queueing, claims, idempotency records)
        commit concurrently. SQLite has one writer: there it runs on the database thread, which
        also spares it the "database is locked" of a transaction that reads, then writes, while
        another connection commits.
        """
        if self.engine.dialect.name == "sqlite":
            return await self.call(lambda engine, _raw: fn(engine))
        return await self.read(fn)

    @property
    def opened(self) -> bool:
        """True once the database has been opened (reached, its schema checked) by this store."""
        return self._raw is not None

    def register(self, writer: Writer) -> None:
        self._writers[id(writer)] = writer

    def unregister(self, writer: Writer) -> None:
        self._writers.pop(id(writer), None)

    def stop(self) -> threading.Thread | None:
        for loop in list(self._turns):  # writes of a turn not ended yet commit before the stop
            turn = self._turns.pop(loop, None)
            if turn:
                self._put(turn)
        behind = self._onloop.take_behind()  # writes waiting behind a query in flight on a loop go after it
        if behind:
            self._put(behind)
        with self._lock:
            self.closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
        return thread

    # -- on the database thread ------------------------------------------------------------------

    def _open(self) -> StoreError | None:
        """Open the database if it is not open yet (tried again on each use after a failure)."""
        if self._raw is not None:
            return None
        try:
            self._opener(self.engine)
            self._fairy = self.engine.raw_connection()
            self._raw = self._fairy.driver_connection
            if not self.qmark:
                self._literals = Literals.of(self._raw)
        except StoreError as exc:
            return exc
        except Exception as exc:
            return StoreError(f"The store could not be opened: {_describe(exc)}")
        return None

    def _main(self) -> None:
        beat = self.lease / 3
        next_beat = time.monotonic() + beat
        pending: list[Any] = []
        while True:
            now = time.monotonic()
            if now >= next_beat:  # leases of runs that wrote nothing lately (a long tool call)
                with self._patient():
                    self._heartbeat()
                next_beat = now + beat
                continue
            wait = next_beat - now
            if self._uncheckpointed:  # SQLite: move the WAL into the database file once writes pause
                wait = min(wait, _CHECKPOINT_IDLE)
            try:
                item = pending.pop(0) if pending else self._queue.get(timeout=wait)
            except queue.Empty:
                if self._uncheckpointed:
                    with self._patient():
                        self.checkpoint()
                continue
            if item is _STOP:
                self._shutdown()
                return
            if item is _POKE:  # the loop committed (SQLite): the wait above is worked out again
                if self._uncheckpointed >= _CHECKPOINT_EVERY:
                    with self._patient():
                        self.checkpoint()
                continue
            taken = 1
            with self._patient():
                if isinstance(item, _Call):
                    self._run_call(item)
                else:
                    batch = list(item) if isinstance(item, list) else [item]
                    while True:  # everything queued behind it joins this transaction (group commit)
                        try:
                            more = self._queue.get_nowait()
                        except queue.Empty:
                            break
                        if isinstance(more, Write | list):
                            batch += more if isinstance(more, list) else [more]
                            taken += 1
                        elif more is not _POKE:
                            pending.append(more)
                            break
                    self._commit(batch)
                    if self._uncheckpointed >= _CHECKPOINT_EVERY:  # writes never pause: the WAL must not grow on
                        self.checkpoint()
            with self._plock:
                self._pending -= taken

    @contextlib.contextmanager
    def _patient(self) -> Iterator[None]:
        """The thread's hold of the connection, which waits for a lock (up to 30 s) while the thread holds it.

        On SQLite the write connection waits for no lock otherwise: a commit on the event loop
        (`_inline`) that meets another process's write fails at once and goes to the thread.
        """
        while not self._busy.acquire(timeout=0.5):  # held by a loop's query in flight (`OnLoop`)
            self._onloop.rescue()
        try:
            raw = self._raw if self.qmark else None
            if raw is not None:
                with contextlib.suppress(Exception):
                    raw.execute("PRAGMA busy_timeout=30000")
            try:
                yield
            finally:
                raw = self._raw if self.qmark else None
                if raw is not None:
                    with contextlib.suppress(Exception):
                        raw.execute("PRAGMA busy_timeout=0")
        finally:
            self._busy.release()

    def checkpoint(self) -> None:
        """SQLite's WAL checkpoint, done here between transactions rather than inside a commit.

        SQLite's own automatic checkpoint (switched off for the write connection) would run inside
        whichever commit crosses its threshold, adding its cost to that step. On this thread only:
        a `call`'s function (or an SQLite `transact`'s) may call it after its writes.
        """
        self._uncheckpointed = 0
        with contextlib.suppress(Exception):
            cur = self._raw.cursor()
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)")
            cur.close()

    def _run_call(self, item: _Call) -> None:
        value: Any = None
        error: BaseException | None = self._open()
        if error is None:
            try:
                value = item.fn(self.engine, self._raw)
            except ToolplanError as exc:  # our own (RunConflictError, ...) go back as they are
                error = exc
                self._rollback()
            except Exception as exc:  # the database failed, or holds something no toolplan wrote
                error = StoreError(f"The store failed: {_describe(exc)}")
                self._rollback()
        complete(item.loop, [(item.future, error, value)])

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            if self._raw is not None:
                self._raw.rollback()

    def _commit(self, batch: list[Write]) -> None:
        outcome: dict[int, BaseException | None] = {}
        error: BaseException | None = self._open()
        if error is None:
            live = [w for w in batch if w.writer.broken is None]
            for w in batch:
                if w.writer.broken is not None:
                    outcome[id(w)] = StoreError(w.writer.broken)
            last: BaseException | None = None
            for wait in _TRIES:
                try:
                    lost = self._transaction(live) if live else {}
                    for w in live:
                        outcome[id(w)] = lost.get(id(w.writer))
                    last = None
                    break
                except Exception as exc:
                    self._rollback()
                    last = exc
                    if wait is None or isinstance(exc, self._integrity_error):  # retrying cannot help
                        break
                    time.sleep(wait)
            if last is not None:
                message = (
                    f"The store could not commit a write after {len(_RETRIES) + 1} tries: {_describe(last)}. "
                    "The run stops starting steps; resume it once the database works again."
                )
                for w in live:
                    w.writer.broken = message
                    outcome[id(w)] = StoreError(message)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], BaseException | None, Any]]] = {}
        for w in batch:
            if w.future is not None and w.loop is not None:
                failure = outcome.get(id(w), error)
                by_loop.setdefault(w.loop, []).append((w.future, failure, None))
        for loop, done in by_loop.items():
            self.counts.wakeups += 1
            complete(loop, done)

    def _transaction(self, batch: list[Write]) -> dict[int, BaseException]:
        """Write ``batch`` in one transaction; returns the writers whose lease was lost (their writes dropped)."""
        raw = self._raw
        now = time.time()
        until = now + self.lease
        writers = [batch[0].writer] if len(batch) == 1 else list({id(w.writer): w.writer for w in batch}.values())
        lost: dict[int, BaseException] = {}
        # Leases are renewed (and checked) at most every third of a lease: a lease renewed less than
        # that ago has two thirds left, so no other process can have taken the run since.
        due = [w for w in writers if not w.creating and now - w.renewed_at >= self.lease / 3]
        counts = self.counts
        if not self.qmark and not due and self._literals is not None:
            _fault()
            self._write_at_once(raw, batch, self._literals)
        else:
            if self.qmark:
                self._write(raw, batch, due, until, now, lost)
            else:
                self._write_pipelined(raw, batch, due, until, now, lost)
            _fault()
            raw.commit()
            if not self.qmark:
                counts.round_trips += 1  # the COMMIT
        counts.commits += 1
        for writer in due:
            if id(writer) not in lost:
                writer.renewed_at = now
        for w in batch:
            if w.statements and w.writer.creating:  # its rows exist now, with a fresh lease
                w.writer.creating = False
                w.writer.renewed_at = now
        if self.qmark:
            self._uncheckpointed += 1
        return lost

    @staticmethod
    def _lost(writer: Writer, lost: dict[int, BaseException]) -> None:
        message = (
            f"Run {writer.run_id!r} was taken over by another process (its lease expired): this process stops "
            "running it. Give it a longer lease (open_store(url, lease=...))."
        )
        writer.broken = message
        lost[id(writer)] = RunConflictError(message, run_id=writer.run_id)

    def _write(
        self, raw: Any, batch: list[Write], due: list[Writer], until: float, now: float, lost: dict[int, Any]
    ) -> None:
        """The batch's statements in order, behind the leases ``due``; a run whose lease is lost writes nothing."""
        cur = raw.cursor()
        try:
            for writer in due:
                cur.execute(*writer.lease_statement(until, now))
                if cur.rowcount != 1:
                    self._lost(writer, lost)
            for w in batch:
                if id(w.writer) not in lost:
                    for sql, params in w.statements:
                        cur.execute(sql, params)
        finally:
            if not self.qmark:
                self.counts.round_trips += len(due) + sum(len(w.statements) for w in batch if id(w.writer) not in lost)
            cur.close()

    def _write_at_once(self, raw: Any, batch: list[Write], literals: Literals) -> None:
        """PostgreSQL, when no lease is due: the batch's statements and their commit in ONE round trip.

        The statements go as one multi-statement query (the simple query protocol, values written as
        SQL literals): PostgreSQL runs such a query as one implicit transaction, committed at its end
        and rolled back whole if any statement fails. So the batch commits all or nothing, as with
        an explicit transaction, without the separate BEGIN / statements / COMMIT exchanges.
        """
        text = ";\n".join(literals.statement(sql, params) for w in batch for sql, params in w.statements)
        if not text:
            return
        raw.autocommit = True  # no BEGIN of psycopg's own: the query is its own transaction
        try:
            self.counts.round_trips += 1
            raw.execute(text)
        finally:
            raw.autocommit = False

    def _write_pipelined(
        self, raw: Any, batch: list[Write], due: list[Writer], until: float, now: float, lost: dict[int, Any]
    ) -> None:
        """PostgreSQL: every statement of the batch in one round trip (psycopg's pipeline mode).

        The leases are checked once the results are in; if one was lost (rare), the transaction is
        rolled back and written again without that run.
        """
        checks = []
        try:
            with raw.pipeline():
                cur = raw.cursor()
                for writer in due:
                    check = raw.cursor()
                    check.execute(*writer.lease_statement(until, now))
                    checks.append((writer, check))
                for w in batch:
                    for sql, params in w.statements:
                        cur.execute(sql, params)
            self.counts.round_trips += 1  # the pipeline's sync
            if all(check.rowcount == 1 for _, check in checks):
                return
        except self._driver_error:  # a run whose lease was lost may collide with its new owner's rows
            pass
        raw.rollback()
        self._write(raw, batch, due, until, now, lost)

    def _heartbeat(self) -> None:
        if self._raw is None or not self._writers:
            return
        writers = [w for w in self._writers.values() if w.broken is None]
        with contextlib.suppress(Exception):
            lost = self._transaction([Write(w, [], None, None) for w in writers])
            for key in lost:
                self._writers.pop(key, None)
            return
        self._rollback()

    def _shutdown(self) -> None:
        with self._patient():  # a loop's query in flight ends first (a failed one is failed here, with the rest)
            while True:  # fail whatever was queued after the stop
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                for one in item if isinstance(item, list) else [item]:
                    if isinstance(one, Write | _Call) and one.future is not None and one.loop is not None:
                        complete(one.loop, [(one.future, StoreError("The store was closed."), None)])
            with contextlib.suppress(Exception):
                if self._fairy is not None:
                    self._fairy.close()
        self.engine.dispose()


def _fault() -> None:
    if _faults.ACTIVE and _faults.fails("commit_error"):
        raise sa.exc.OperationalError("COMMIT", (), Exception("fault point commit_error"))


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__
