"""The journal of a durable run: the statements a store writes for its runs, and `Journal`, which writes them.

Every statement is prepared once per store, in the driver's parameter style. A step's row is given by
column name (`step_call`, `step_outcome`, `started_row`: keyword arguments, one per column) and bound
as a tuple in the statement's column order, which costs the driver less than binding by name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from .._context import call_key
from .._json import dumps
from ..execute import PlanResult, StepResult
from ..plan import Plan
from ._codec import encode, output_json, result_facts
from ._db import Database, Statement
from ._records import ENDED, STREAMING, plan_id, plan_row

__all__ = (
    "BLOB_THRESHOLD",
    "STARTED_COLUMNS",
    "STEP_COLUMNS",
    "Journal",
    "RunWrites",
    "started_row",
    "step_call",
    "step_outcome",
)

BLOB_THRESHOLD = 64 * 1024  # outputs longer than this (JSON characters) are stored out of line
KNOWN_PLANS = 4096  # plan ids (and limits) a store remembers; forgotten all at once when full


def step_call(
    *,
    execution_id: str,
    step_id: str,
    tool: str,
    call_tool: str,
    status: str,
    attempt: int,
    fallback: int,
    idempotency_key: str,
    session: int,
) -> tuple[Any, ...]:
    """The first columns of a step's row in ``toolplan_steps`` (which step, which call), in `STEP_COLUMNS` order."""
    return (execution_id, step_id, tool, call_tool, status, attempt, fallback, idempotency_key, session)


def step_outcome(
    *,
    output: str | None,
    output_blob: str | None,
    output_note: str | None,
    error_kind: str | None,
    error_message: str | None,
    started_at: float | None,
    ended_at: float | None,
    used_fallback: int,
    warnings: str | None,
    arguments: str | None,
    shared_with: str | None,
    cached: int,
) -> tuple[Any, ...]:
    """The other columns of a step's row (what the call gave), in `STEP_COLUMNS` order.

    A row is two calls (``step_call(...) + step_outcome(...)``): a call with more than 15 keyword
    arguments would pass them through a dict, which costs a durable step more than both calls.
    """
    return (output, output_blob, output_note, error_kind, error_message, started_at, ended_at, used_fallback,
            warnings, arguments, shared_with, cached)  # fmt: skip


def started_row(
    *,
    execution_id: str,
    step_id: str,
    tool: str,
    call_tool: str,
    attempt: int,
    fallback: int,
    idempotency_key: str,
    started_at: float,
    session: int,
) -> tuple[Any, ...]:
    """The columns a step's ``running`` row sets, given by column: its values in `STARTED_COLUMNS` order."""
    return (execution_id, step_id, tool, call_tool, attempt, fallback, idempotency_key, started_at, session)


def _columns(row: Any) -> tuple[str, ...]:
    code = row.__code__
    return tuple(code.co_varnames[: code.co_kwonlyargcount])


# The columns of a step's row as the journal writes it: the keyword arguments of `step_call`, then of
# `step_outcome` (so a value is always given by its column's name, and in the statement's order).
STEP_COLUMNS = _columns(step_call) + _columns(step_outcome)
STARTED_COLUMNS = _columns(started_row)
_PLAN_COLUMNS = ("id", "version", "hash", "dialect", "body", "created_at")


class RunWrites:
    """What a store writes for its durable runs: its statements, prepared once, and who it is (``owner``).

    Also what it need not write again: the ids of plans whose rows it committed (rows of
    toolplan_plans are content-addressed and never change or go away), and the runs to hand back.
    """

    __slots__ = (
        "db",
        "handed_back",
        "lease",
        "owner",
        "plans_stored",
        "sql_blob",
        "sql_close",
        "sql_close_event",
        "sql_ended",
        "sql_event",
        "sql_finished",
        "sql_hand_back",
        "sql_hand_back_event",
        "sql_lease",
        "sql_new_run",
        "sql_plan",
        "sql_plan_of",
        "sql_started",
    )

    def __init__(self, db: Database, *, owner: str, lease: float) -> None:
        self.db = db
        self.owner = owner
        self.lease = lease
        self.handed_back: set[str] = set()
        self.plans_stored: set[str] = set()
        sql = db.sql
        started = ", ".join(STARTED_COLUMNS)
        self.sql_started = sql(
            f"INSERT INTO toolplan_steps ({started}, status, used_fallback) VALUES ({_marks(STARTED_COLUMNS)}, "
            "'running', 0) ON CONFLICT (execution_id, step_id) DO UPDATE SET call_tool = excluded.call_tool, "
            "status = 'running', attempt = excluded.attempt, fallback = excluded.fallback, "
            "idempotency_key = excluded.idempotency_key, "
            "started_at = COALESCE(toolplan_steps.started_at, excluded.started_at), session = excluded.session"
        )
        columns = ", ".join(STEP_COLUMNS)
        update = (
            "status = excluded.status, attempt = excluded.attempt, output = excluded.output, "
            "output_blob = excluded.output_blob, output_note = excluded.output_note, error_kind = excluded.error_kind, "
            "error_message = excluded.error_message, started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "used_fallback = excluded.used_fallback, warnings = excluded.warnings, arguments = excluded.arguments, "
            "shared_with = excluded.shared_with, cached = excluded.cached, session = excluded.session"
        )
        upsert = (
            f"INSERT INTO toolplan_steps ({columns}) VALUES ({_marks(STEP_COLUMNS)}) "
            "ON CONFLICT (execution_id, step_id) DO UPDATE SET"
        )
        self.sql_finished = sql(f"{upsert} {update}")
        # A step that ended without a call never overwrites an outcome that committed first.
        self.sql_ended = sql(f"{upsert} {update} WHERE toolplan_steps.status NOT IN {ENDED!r}")
        self.sql_event = sql(
            "INSERT INTO toolplan_events (execution_id, seq, type, step_id, payload, at) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.sql_blob = sql(
            "INSERT INTO toolplan_blobs (id, execution_id, data) VALUES (?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET data = excluded.data"
        )
        self.sql_plan = sql(
            "INSERT INTO toolplan_plans (id, version, hash, dialect, body, created_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING"
        )
        self.sql_new_run = sql(
            "INSERT INTO toolplan_executions (id, plan_id, parent_id, status, limits, calls, cost, owner, lease_until, "
            "created_at, updated_at, session) VALUES (?, ?, ?, 'running', ?, 0, 0.0, ?, ?, ?, ?, 1)"
        )
        self.sql_plan_of = sql("UPDATE toolplan_executions SET plan_id = ? WHERE id = ?")
        self.sql_lease = sql(
            "UPDATE toolplan_executions SET lease_until = ?, updated_at = ?, calls = ?, cost = ? "
            "WHERE id = ? AND owner = ?"
        )
        # A run's last writes change its row first, then add its event only if that change was made
        # (the row holds this process's token, ``updated_at``, with no owner): a process that lost the
        # run (its lease expired, another took it) writes no event, and the event always tells the
        # status the row was left in (on PostgreSQL too, where a statement sees others' commits).
        self.sql_close = sql(
            "UPDATE toolplan_executions SET status = ?, result = ?, owner = NULL, lease_until = NULL, updated_at = ?, "
            "calls = ?, cost = ? WHERE id = ? AND owner = ?"
        )
        self.sql_close_event = sql(
            "INSERT INTO toolplan_events (execution_id, seq, type, step_id, payload, at) "
            "SELECT id, ?, ?, NULL, ?, ? FROM toolplan_executions "
            "WHERE id = ? AND owner IS NULL AND updated_at = ? AND status = ?"
        )
        # A run handed back (`Store.hand_back`) is queued again, unless a cancel was asked for it meanwhile.
        self.sql_hand_back = sql(
            "UPDATE toolplan_executions SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' "
            "END, result = NULL, owner = NULL, lease_until = NULL, updated_at = ?, calls = ?, cost = ? "
            "WHERE id = ? AND owner = ?"
        )
        cancelled = "CASE WHEN status = 'cancelled' THEN"
        self.sql_hand_back_event = sql(
            "INSERT INTO toolplan_events (execution_id, seq, type, step_id, payload, at) "
            f"SELECT id, ?, {cancelled} 'plan_finished' ELSE 'run_queued' END, NULL, "
            f"{cancelled} '{dumps({'status': 'cancelled'})}' ELSE '{dumps({'status': 'queued'})}' END, ? "
            "FROM toolplan_executions WHERE id = ? AND owner IS NULL AND updated_at = ? "
            "AND status IN ('cancelled', 'queued')"
        )

    def plan_stored(self, done: asyncio.Future[None], plan_ref: str) -> None:
        """Remember that plan ``plan_ref``'s row committed (its next runs need not write it)."""
        if done.cancelled() or done.exception() is not None:
            return
        if len(self.plans_stored) >= KNOWN_PLANS:
            self.plans_stored.clear()
        self.plans_stored.add(plan_ref)

    def plan_statement(self, body: str, dialect: str, now: float) -> Statement:
        """The insert of an encoded plan's row (nothing if equal plan is stored already)."""
        row = plan_row(body, now, dialect)
        return self.sql_plan, tuple(row[k] for k in _PLAN_COLUMNS)

    def new_run_statements(
        self, run_id: str, body: str | None, dialect: str, limits: str, parent: str | None, *, plan_ref: str = ""
    ) -> list[Statement]:
        """The inserts that create a new run held by this process: its plan's row (if known) and its own.

        The plan's row is left out when this store has committed it before (``plan_ref``: its id, if known).
        """
        now = time.time()
        if not plan_ref:
            plan_ref = plan_id(body) if body is not None else STREAMING
        statements: list[Statement] = []
        if body is not None and plan_ref not in self.plans_stored:
            statements.append(self.plan_statement(body, dialect, now))
        statements.append(
            (self.sql_new_run, (run_id, plan_ref, parent, limits, self.owner, now + self.lease, now, now))
        )
        return statements


class Journal:
    """The journal of one durable run in a `Store` (the engine's journal protocol, `toolplan.execute._journal.Journal`).

    Writes that nobody waits for (a finished step, a skipped one, an event) gather in a buffer that
    goes to the database thread at the end of the event loop's turn, or with the next write that is
    waited for (a step about to call its tool): a chain's result and its dependent's ``running`` row
    then commit in one transaction, in that order, and a tick that ends many steps commits once.
    """

    __slots__ = (
        "_buffer",
        "_future",
        "_writes",
        "broken",
        "calls",
        "claimed",
        "cost",
        "creating",
        "owner",
        "renewed_at",
        "run_id",
        "seq",
        "session",
    )

    def __init__(self, writes: RunWrites, run_id: str, *, claimed: bool, next_seq: int, session: int = 1) -> None:
        self._writes = writes
        self.run_id = run_id
        self.session = session  # the run's session this process holds: written on every step row
        self.owner = writes.owner
        self.claimed = claimed
        self.seq = next_seq - 1
        self.calls = 0
        self.cost = 0.0
        self.broken: str | None = None if claimed else "This process does not hold the run."
        self._buffer: list[Statement] = []
        self._future: asyncio.Future[None] | None = None  # done when the buffer has committed
        self.creating = False  # a new run whose rows have not committed yet (`Store._create_later`)
        self.renewed_at = 0.0  # when its lease was last renewed by a commit (the database thread sets it)

    def lease_statement(self, until: float, now: float) -> Statement:
        return self._writes.sql_lease, (until, now, self.calls, self.cost, self.run_id, self.owner)

    def _event(self, kind: str, step_id: str | None, payload: Mapping[str, Any], at: float) -> Statement:
        self.seq += 1
        return self._writes.sql_event, (self.run_id, self.seq, kind, step_id, dumps(payload), at)

    def _add(self, statements: list[Statement]) -> asyncio.Future[None]:
        """Buffer ``statements``; the future is done once they have committed."""
        self._buffer.extend(statements)
        future = self._future
        if future is None:
            loop = asyncio.get_running_loop()
            future = self._future = loop.create_future()  # a failure is marked seen when set (`_db._complete`)
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        future, self._future = self._future, None
        if future is None:
            return
        statements, self._buffer = self._buffer, []
        self._writes.db.write(self, statements, future)

    def event(self, kind: str, step_id: str | None, payload: Mapping[str, object]) -> asyncio.Future[None]:
        return self._add([self._event(kind, step_id, payload, time.time())])

    def plan_complete(self, plan: Plan) -> None:
        writes, body = self._writes, encode(plan)
        self._add(
            [
                writes.plan_statement(body, plan.dialect, time.time()),
                (writes.sql_plan_of, (plan_id(body), self.run_id)),
            ]
        )

    def started(self, step_id: str, tool: str, attempt: int, fallback: int, at: float) -> asyncio.Future[None]:
        key = call_key(self.run_id, step_id, fallback)
        payload: dict[str, Any] = {"tool": tool, "attempt": attempt}
        if fallback:
            payload["fallback"] = True
        future = self._add(
            [
                (
                    self._writes.sql_started,
                    started_row(
                        execution_id=self.run_id,
                        step_id=step_id,
                        tool=tool,
                        call_tool=tool,
                        attempt=attempt,
                        fallback=int(fallback),
                        idempotency_key=key,
                        started_at=at,
                        session=self.session,
                    ),
                ),
                self._event("step_started", step_id, payload, at),
            ]
        )
        self._flush()  # waited for: it goes now, with everything buffered before it
        return future

    def _row(self, r: StepResult, sql: str) -> list[Statement]:
        statements: list[Statement] = []
        output = blob = note = None
        if r.status == "succeeded":
            output, note = output_json(r.output)
            if len(output) > BLOB_THRESHOLD:
                blob = f"{self.run_id}:{r.id}"
                statements.append((self._writes.sql_blob, (blob, self.run_id, output)))
                output = None
        error = r.error
        row = step_call(
            execution_id=self.run_id,
            step_id=r.id,
            tool=r.tool,
            call_tool=r.tool,
            status=r.status,
            attempt=r.attempts,
            fallback=0,
            idempotency_key=f"{self.run_id}:{r.id}",
            session=self.session,
        ) + step_outcome(
            output=output,
            output_blob=blob,
            output_note=note,
            error_kind=error.kind if error else None,
            error_message=error.message if error else None,
            started_at=r.started_at,
            ended_at=r.ended_at,
            used_fallback=r.fallback_link or int(r.used_fallback),  # the link of its fallback chain that stands
            warnings=dumps(list(r.warnings)) if r.warnings else None,
            arguments=dumps(r.arguments) if r.arguments is not None else None,
            shared_with=dumps(list(r.shared_with)) if r.shared_with else None,
            cached=int(r.cached),
        )
        statements.append((sql, row))
        payload: dict[str, Any] = {"status": r.status, "attempts": r.attempts}
        if r.error is not None:
            payload["error"] = r.error.to_dict()
        statements.append(self._event("step_finished", r.id, payload, time.time()))
        return statements

    def finished(self, result: StepResult, calls: int, cost: float) -> asyncio.Future[None]:
        self.calls, self.cost = calls, cost  # kept up to date in the run's row when its lease is renewed
        return self._add(self._row(result, self._writes.sql_finished))

    def ended(self, result: StepResult) -> None:
        self._add(self._row(result, self._writes.sql_ended))

    async def close(self, result: PlanResult | None, calls: int, cost: float) -> None:
        if not self.claimed:
            return
        self.calls, self.cost = calls, cost
        if self.run_id in self._writes.handed_back:
            self._writes.handed_back.discard(self.run_id)
            if result is None:  # stopped by its process's end: for another process to take up
                await self._hand_back()
                return
        status = "cancelled" if result is None else result.status
        facts: str | None = None
        if result is not None:
            facts = result_facts(result)
        await self._release(status, facts)

    async def release(self, status: str) -> None:
        """Let go of the run without finishing it (``queued``: for a worker to take)."""
        await self._release(status, None)

    async def _release(self, status: str, facts: str | None) -> None:
        writes = self._writes
        kind = "plan_finished" if status in ("succeeded", "failed", "cancelled") else f"run_{status}"
        now = time.time()
        self.seq += 1
        close = (writes.sql_close, (status, facts, now, self.calls, self.cost, self.run_id, self.owner))
        end = (writes.sql_close_event, (self.seq, kind, dumps({"status": status}), now, self.run_id, now, status))
        await self._last([close, end])

    async def _hand_back(self) -> None:
        writes = self._writes
        now = time.time()
        self.seq += 1
        back = (writes.sql_hand_back, (now, self.calls, self.cost, self.run_id, self.owner))
        await self._last([back, (writes.sql_hand_back_event, (self.seq, now, self.run_id, now))])

    async def _last(self, statements: list[Statement]) -> None:
        """Write the run's last ``statements`` (its end and its release) and close the journal."""
        try:
            if self.broken is None:
                future = self._add(statements)
                self._flush()
                await future
        finally:
            self._writes.db.unregister(self)
            self.broken = "The run was closed."


def _marks(columns: tuple[str, ...]) -> str:
    return ", ".join("?" * len(columns))
