"""`Store`: plans, executions, step runs and events in SQLite or PostgreSQL, and the journal of a durable run."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from .._errors import PlanIssue, PlanNotFoundError, RunConflictError, RunNotFoundError, StoreError, UserError
from .._json import dumps, loads
from ..execute import PlanResult, PlanStatus, RunLimits, StepResult
from ..execute._journal import StoredRun, StoredStep, check_run_id
from ..plan import Plan, Step, parse_plan
from ..policy import ArmStats, Observation
from . import _schema as t
from ._codec import decode, encode, output_json, plan_hash, step_from_row
from ._db import Database, Statement

__all__ = (
    "PlanVersion",
    "RequestInfo",
    "RunInfo",
    "RunSummary",
    "Store",
    "StoredEvent",
    "new_run_id",
    "open_store",
)

BLOB_THRESHOLD = 64 * 1024  # outputs longer than this (JSON characters) are stored out of line
_ENDED = ("succeeded", "failed", "timed_out", "unknown_outcome")  # a step's own outcome
_KNOWN_PLANS = 4096  # plan ids (and limits) a store remembers; forgotten all at once when full


def open_store(url: str = "sqlite:///toolplan.db", *, lease: float = 30.0) -> Store:
    """A store at ``url``: ``sqlite:///path.db`` (a file, created if absent) or ``postgresql://user@host/db``.

    Nothing is opened yet: the database is reached, and its schema created or migrated, on first use
    (on the store's own thread, never on the event loop). Close it with ``await store.close()``, or
    use it as ``async with open_store(url) as store:``.

    Args:
        url: The database URL. ``sqlite://`` alone is an in-memory database (tests).
        lease: Seconds a process holds a run it is running without renewing its claim; another
            process may take the run over once it expires. Renewed every ``lease / 3`` seconds.

    Raises:
        UserError: the URL is not a SQLite or PostgreSQL URL.
        OptionalDependencyError: PostgreSQL without its driver (``pip install "toolplan[postgres]"``).
    """
    return Store(url, lease=lease)


def _engine(url: str) -> sa.Engine:
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise UserError(
            f"{url!r} is not a database URL. Use sqlite:///path/to/runs.db or postgresql://user@host:5432/dbname."
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+pysqlite")
        memory = parsed.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"poolclass": sa.pool.StaticPool} if memory else {}
        engine = sa.create_engine(parsed, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA wal_autocheckpoint=0")  # the store's thread checkpoints between writes
            cur.close()

        return engine
    if backend in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            from .._errors import OptionalDependencyError

            raise OptionalDependencyError("A PostgreSQL store", "postgres", package="psycopg") from None
        parsed = parsed.set(drivername="postgresql+psycopg")
        return sa.create_engine(parsed, pool_pre_ping=True)
    raise UserError(
        f"toolplan stores runs in SQLite or PostgreSQL, not {backend!r}: use sqlite:///runs.db or postgresql://..."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One stored run, as `Store.list_runs` gives it.

    ``steps`` counts the plan's steps (for `list_runs`: the steps with a row), ``calls`` the tool
    calls its steps began, on record (what its budget has spent), ``owner`` and ``lease_until`` the
    process holding it while it runs.
    """

    run_id: str
    status: str
    plan_id: str
    parent_id: str | None
    steps: int
    succeeded: int
    calls: int
    created_at: float
    updated_at: float
    owner: str | None
    lease_until: float | None
    source_plan_id: str | None = None  # the plan id a service client asked to run (a draft's, a posted plan's)
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanVersion:
    """One version of a planner's plan: the first draft, or the repair of its ``parent_id``.

    ``plan`` is None when the model's text did not parse; ``text`` is what the model wrote.
    """

    plan_id: str
    parent_id: str | None
    plan: Plan | None
    text: str
    issues: tuple[PlanIssue, ...]
    valid: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    """A stored planning request: the question and every version of its plan, oldest first."""

    request_id: str
    query: str
    plan_id: str | None  # the final version
    created_at: float
    versions: tuple[PlanVersion, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """Everything stored about one run: its plan, limits, status and the records of its steps."""

    summary: RunSummary
    plan: Plan
    limits: RunLimits
    result: PlanResult

    @property
    def finished(self) -> bool:
        """True when the run ended succeeded or failed (resume returns it as it is)."""
        return self.summary.status in ("succeeded", "failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """One stored event of a run: its number in the run's gap-free sequence, type and payload."""

    run_id: str
    seq: int
    type: str
    step_id: str | None
    payload: Any
    at: float


class Store:
    """Durable runs in one database. Made by `open_store`; implements `toolplan.execute.RunStore`."""

    def __init__(self, url: str, *, lease: float = 30.0) -> None:
        if not (isinstance(lease, int | float) and 0.1 <= lease <= 86_400) or isinstance(lease, bool):
            raise UserError(f"lease must be a number of seconds from 0.1 to 86400, not {lease!r}.")
        self.url = url
        self.lease = float(lease)
        self.owner = f"{_HOST}:{os.getpid()}:{os.urandom(4).hex()}"
        self._handed_back: set[str] = set()
        # Per-run costs a store need not pay again (a service runs the same plan many times): the ids
        # of plans whose rows this store committed (rows of toolplan_plans are content-addressed and
        # never change or go away), and the text of limits met before.
        self._plans_stored: set[str] = set()
        self._limits_text: dict[int, tuple[RunLimits, str]] = {}  # by id(): each kept alive, so its id is its own
        self.db = Database(_engine(url), lease=self.lease, opener=_open)
        sql = self.db.sql
        self.sql_started = sql(
            "INSERT INTO toolplan_steps (execution_id, step_id, tool, call_tool, status, attempt, fallback, "
            "idempotency_key, started_at, used_fallback, session) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, 0, ?) "
            "ON CONFLICT (execution_id, step_id) DO UPDATE SET call_tool = excluded.call_tool, status = 'running', "
            "attempt = excluded.attempt, fallback = excluded.fallback, idempotency_key = excluded.idempotency_key, "
            "started_at = COALESCE(toolplan_steps.started_at, excluded.started_at), session = excluded.session"
        )
        columns = (
            "execution_id, step_id, tool, call_tool, status, attempt, fallback, idempotency_key, output, output_blob, "
            "output_note, error_kind, error_message, started_at, ended_at, used_fallback, warnings, arguments, session"
        )
        values = "VALUES (" + ", ".join("?" * 19) + ")"
        update = (
            "status = excluded.status, attempt = excluded.attempt, output = excluded.output, "
            "output_blob = excluded.output_blob, output_note = excluded.output_note, error_kind = excluded.error_kind, "
            "error_message = excluded.error_message, started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "used_fallback = excluded.used_fallback, warnings = excluded.warnings, arguments = excluded.arguments, "
            "session = excluded.session"
        )
        upsert = f"INSERT INTO toolplan_steps ({columns}) {values} ON CONFLICT (execution_id, step_id) DO UPDATE SET"
        self.sql_finished = sql(f"{upsert} {update}")
        # A step that ended without a call never overwrites an outcome that committed first.
        self.sql_ended = sql(f"{upsert} {update} WHERE toolplan_steps.status NOT IN {_ENDED!r}")
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
        self.sql_close = sql(
            "UPDATE toolplan_executions SET status = ?, result = ?, owner = NULL, lease_until = NULL, updated_at = ?, "
            "calls = ?, cost = ? WHERE id = ? AND owner = ?"
        )
        # A run handed back (`hand_back`) is queued again, unless a cancel was asked for it meanwhile.
        asked = "CASE WHEN cancel_requested = 1 THEN"
        self.sql_hand_back_event = sql(
            "INSERT INTO toolplan_events (execution_id, seq, type, step_id, payload, at) "
            f"SELECT id, ?, {asked} 'plan_finished' ELSE 'run_queued' END, NULL, "
            f"{asked} '{dumps({'status': 'cancelled'})}' ELSE '{dumps({'status': 'queued'})}' END, ? "
            "FROM toolplan_executions WHERE id = ? AND owner = ?"
        )
        self.sql_hand_back = sql(
            f"UPDATE toolplan_executions SET status = {asked} 'cancelled' ELSE 'queued' END, result = NULL, "
            "owner = NULL, lease_until = NULL, updated_at = ?, calls = ?, cost = ? WHERE id = ? AND owner = ?"
        )

    def __repr__(self) -> str:
        return f"Store({self.url_shown!r})"

    def hand_back(self, run_id: str) -> None:
        """When run ``run_id``, run by this process, is cancelled next, queue it again instead.

        For a process that stops while it runs ``run_id`` (the service, on SIGTERM): the run is
        stored ``queued`` (a ``run_queued`` event), not ``cancelled`` (``plan_finished``), in one
        transaction, so any process takes it up and a client following its events sees no end.
        Its steps that were running end ``cancelled`` and run again there. A run whose cancel was
        asked (the service's ``cancel_requested``) ends ``cancelled`` all the same.
        """
        self._handed_back.add(run_id)

    @property
    def url_shown(self) -> str:
        """The URL with any password hidden."""
        return _masked(self.url)

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Finish pending writes and close the database (runs still open keep their rows, resumable)."""
        thread = self.db.stop()
        if thread is not None:
            await asyncio.to_thread(thread.join)

    # -- durable runs (the RunStore protocol) ----------------------------------------------------

    async def begin(
        self,
        run_id: str | None,
        plan: Plan | None,
        limits: RunLimits,
        *,
        parent: str | None = None,
        reopen: bool = False,
    ) -> tuple[_Journal, StoredRun | None]:
        """Claim run ``run_id`` (new when None) for this process; see `toolplan.execute.RunStore`."""
        fresh = run_id is None
        run_id = new_run_id() if run_id is None else check_run_id(run_id)
        body = encode(plan) if plan is not None else None
        dialect = plan.dialect if plan is not None else "native"
        if fresh and self.db.opened:  # a new id: nothing to look up, so no round trip (see `_create_later`)
            return self._create_later(run_id, plan, body, dialect, self._encode_limits(limits), parent), None
        claim = _Claim(self, run_id, body, self._encode_limits(limits), parent, reopen, dialect=dialect, fresh=fresh)
        claimed_at = time.time()
        stored: StoredRun | None = await self.db.call(claim)
        journal = _Journal(self, run_id, claimed=claim.claimed, next_seq=claim.next_seq, session=claim.session)
        journal.renewed_at = claimed_at  # the claim's lease was set after this moment
        if stored is not None:  # every write renews the lease with the counters: they go on from the stored ones
            journal.calls, journal.cost = stored.calls, stored.cost
        if claim.claimed:
            self.db.register(journal)
            if stored is None:
                steps = list(plan.step_ids) if plan is not None else []
                journal.event("plan_started", None, {"plan_id": claim.plan_id, "steps": steps})
            else:
                journal.event("run_resumed", None, {"owner": self.owner})
        return journal, stored

    def _create_later(
        self, run_id: str, plan: Plan | None, body: str | None, dialect: str, limits: str, parent: str | None
    ) -> _Journal:
        """The journal of a new run whose rows are written with its first writes, in their transaction.

        A fresh id cannot be taken, so the run's rows need no round trip of their own: they go first
        in the journal's buffer, and the first step's ``running`` row commits with them (its call
        waits for that commit, as always). Until they commit, the run has no lease to check.
        """
        journal = _Journal(self, run_id, claimed=True, next_seq=1)
        journal.creating = True
        plan_ref = plan_id(body) if body is not None else STREAMING
        created = journal._add(self.new_run_statements(run_id, body, dialect, limits, parent, plan_ref=plan_ref))
        if body is not None and plan_ref not in self._plans_stored:
            created.add_done_callback(lambda done: self._plan_stored(done, plan_ref))
        self.db.register(journal)
        steps = list(plan.step_ids) if plan is not None else []
        journal.event("plan_started", None, {"plan_id": plan_ref, "steps": steps})
        return journal

    def _plan_stored(self, done: asyncio.Future[None], plan_ref: str) -> None:
        """Remember that plan ``plan_ref``'s row committed (its next runs need not write it)."""
        if done.cancelled() or done.exception() is not None:
            return
        if len(self._plans_stored) >= _KNOWN_PLANS:
            self._plans_stored.clear()
        self._plans_stored.add(plan_ref)

    def _encode_limits(self, limits: RunLimits) -> str:
        """``encode(limits)``, remembered for a limits object met before.

        `RunLimits` are frozen, and runs given the same options share one (``toolplan.execute``
        keeps the last one built).
        """
        if limits.window is not None:  # a live object of the process (never stored): not kept here
            return encode(limits)
        known = self._limits_text.get(id(limits))
        if known is not None and known[0] is limits:
            return known[1]
        text = encode(limits)
        if len(self._limits_text) >= _KNOWN_PLANS:
            self._limits_text.clear()
        self._limits_text[id(limits)] = (limits, text)
        return text

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
        if body is not None and plan_ref not in self._plans_stored:
            statements.append(self.plan_statement(body, dialect, now))
        statements.append(
            (self.sql_new_run, (run_id, plan_ref, parent, limits, self.owner, now + self.lease, now, now))
        )
        return statements

    async def submit(self, plan: Any, *, limits: RunLimits | None = None, run_id: str | None = None) -> str:
        """Store a run to be run later by a worker (`claim_next`, ``toolplan runs work``); returns its id.

        ``plan`` is a `Plan`, a dict or JSON text in any dialect; its structure is checked now (its
        tools when a worker runs it).

        Raises:
            PlanValidationError: the plan's structure is invalid.
            RunConflictError: ``run_id`` is stored already.
        """
        if not isinstance(plan, Plan):
            plan = parse_plan(plan)
        journal, stored = await self.begin(run_id, plan, limits or RunLimits())
        if stored is not None:
            raise RunConflictError(f"Run {journal.run_id!r} exists already.", run_id=journal.run_id)
        await journal.release("queued")
        return journal.run_id

    async def claim_next(self, *, skip: Collection[str] = (), dead_local: bool = False) -> str | None:
        """The id of a run that needs a process, now held by this one (resume it next); or None.

        That is a queued run (`submit`), or a running one whose lease expired (its process died);
        with ``dead_local``, also a running one whose process, on this machine, is gone (no need to
        wait out its lease). Cancelled runs are left alone (someone stopped them), as are runs in ``skip``.
        """
        return await self.db.transact(lambda engine: self._claim_next(engine, set(skip), dead_local))  # type: ignore[no-any-return]

    def _claim_next(self, engine: sa.Engine, skip: set[str], dead_local: bool) -> str | None:
        now = time.time()
        e = t.executions
        # A run that needs a process. Checked again by the UPDATE: a run listed here may have been
        # taken, or even finished (its owner NULL again), by another process since.
        base = (e.c.status.in_(("queued", "running")), e.c.plan_id != STREAMING)
        needs = (*base, sa.or_(e.c.owner.is_(None), e.c.lease_until < now))
        with engine.begin() as conn:
            listed = sa.select(e.c.id, e.c.owner).where(*needs).order_by(e.c.created_at).limit(20 + len(skip))
            candidates = [(c[0], None) for c in conn.execute(listed).all() if c[0] not in skip]
            if dead_local and not candidates:
                held_here = sa.select(e.c.id, e.c.owner).where(*base, e.c.owner.like(f"{_HOST}:%")).limit(200)
                candidates = [
                    (c[0], c[1]) for c in conn.execute(held_here).all() if c[0] not in skip and _dead_here(c[1])
                ]
        for run_id, dead in candidates:
            with engine.begin() as conn:
                where = (e.c.id == run_id, *base, e.c.owner == dead) if dead is not None else (e.c.id == run_id, *needs)
                taken = conn.execute(
                    sa.update(e)
                    .where(*where)
                    .values(owner=self.owner, lease_until=now + self.lease, status="running", updated_at=now)
                ).rowcount
            if taken == 1:  # held by this process now: its `begin` (resume) takes it up
                return str(run_id)
        return None

    # -- planning requests ---------------------------------------------------------------------

    async def save_request(
        self, request_id: str, query: str, versions: Sequence[PlanVersion], *, usage: Mapping[str, Any] | None = None
    ) -> None:
        """Store a planning request and every version of its plan (a repair linked to its parent), in one transaction.

        Raises:
            RunConflictError: ``request_id`` is stored already.
        """
        now = time.time()

        def write(engine: sa.Engine, _raw: Any) -> None:
            with engine.begin() as conn:
                if conn.execute(sa.select(t.requests.c.id).where(t.requests.c.id == request_id)).first():
                    raise RunConflictError(f"Request {request_id!r} is stored already.", run_id=request_id)
                final = versions[-1].plan_id if versions else None
                usage_text = dumps(dict(usage)) if usage is not None else None
                conn.execute(
                    sa.insert(t.requests).values(
                        id=request_id, query=query, plan_id=final, usage=usage_text, created_at=now
                    )
                )
                for n, v in enumerate(versions, start=1):
                    body = encode(v.plan) if v.plan is not None else "null"
                    conn.execute(
                        sa.insert(t.plans).values(
                            id=v.plan_id,
                            version=n,
                            parent_id=v.parent_id,
                            hash=plan_hash(body),
                            dialect=v.plan.dialect if v.plan is not None else "native",
                            body=body,
                            created_at=now,
                            request_id=request_id,
                            text=v.text,
                            issues=dumps([i.to_dict() | {"severity": i.severity} for i in v.issues]),
                            valid=int(v.valid),
                        )
                    )

        await self.db.call(write)

    async def get_request(self, request_id: str) -> RequestInfo:
        """A stored planning request with every version of its plan.

        Raises:
            PlanNotFoundError: no request has that id.
        """

        def read(engine: sa.Engine, _raw: Any) -> RequestInfo:
            p, r = t.plans, t.requests
            with engine.connect() as conn:
                row = conn.execute(sa.select(r).where(r.c.id == request_id)).mappings().first()
                if row is None:
                    raise PlanNotFoundError(f"No planning request {request_id!r} is stored here.", plan_id=request_id)
                rows = conn.execute(sa.select(p).where(p.c.request_id == request_id).order_by(p.c.version)).mappings()
                versions = tuple(_version(v) for v in rows)
            return RequestInfo(
                request_id=request_id,
                query=row["query"],
                plan_id=row["plan_id"],
                created_at=row["created_at"],
                versions=versions,
            )

        return await self.db.read(lambda engine: read(engine, None))  # type: ignore[no-any-return]

    async def get_plan(self, plan_id: str) -> Plan:
        """A stored plan, by id (a planner's ``plan_...`` id, or an execution's plan id).

        Raises:
            PlanNotFoundError: no plan has that id, or it is a draft that did not parse.
        """

        def read(engine: sa.Engine, _raw: Any) -> Plan:
            with engine.connect() as conn:
                body = conn.execute(sa.select(t.plans.c.body).where(t.plans.c.id == plan_id)).scalar()
            if body is None or body == "null":
                what = "is stored here" if body is None else "is a draft that could not be read as a plan"
                raise PlanNotFoundError(f"No plan {plan_id!r} {what}.", plan_id=plan_id)
            return decode(body)  # type: ignore[no-any-return]

        return await self.db.read(lambda engine: read(engine, None))  # type: ignore[no-any-return]

    # -- reading ---------------------------------------------------------------------------------

    async def plan_of(self, run_id: str) -> tuple[Plan, RunLimits]:
        """The plan and limits run ``run_id`` was stored with.

        Raises:
            RunNotFoundError: no run has that id.
        """

        def read(engine: sa.Engine, _raw: Any) -> tuple[Plan, RunLimits]:
            e = t.executions
            with engine.connect() as conn:
                row = conn.execute(
                    sa.select(t.plans.c.body, e.c.limits)
                    .join(t.plans, t.plans.c.id == e.c.plan_id)
                    .where(e.c.id == run_id)
                ).first()
            if row is None:
                with engine.connect() as conn:
                    streamed = conn.execute(sa.select(e.c.plan_id).where(e.c.id == run_id)).scalar()
                if streamed == STREAMING:
                    raise StoreError(
                        f"Run {run_id!r} was a streamed plan whose text never arrived whole (its process stopped "
                        "while the model was writing it), so there is no plan to resume. `toolplan runs show` "
                        "lists the steps that had started."
                    )
                raise _not_found(run_id)
            return decode(row[0]), decode(row[1])

        return await self.db.read(lambda engine: read(engine, None))  # type: ignore[no-any-return]

    async def get_run(self, run_id: str) -> RunInfo:
        """Everything stored about ``run_id``.

        Raises:
            RunNotFoundError: no run has that id.
        """
        return await self.db.read(lambda engine: _load_info(engine, run_id))  # type: ignore[no-any-return]

    async def list_runs(self, *, limit: int = 50, status: str | None = None) -> list[RunSummary]:
        """The most recent runs first (at most ``limit``), optionally only those with ``status``."""
        return await self.db.read(lambda engine: _list(engine, limit, status))  # type: ignore[no-any-return]

    # -- tool statistics (the toolplan.policy.StatsStore protocol) ------------------------------------

    async def load_tool_stats(self, group: str) -> dict[str, ArmStats]:
        """A tool policy's stored statistics of ``group``'s tools, by tool (as last updated)."""
        from ._stats import load_tool_stats

        return await load_tool_stats(self, group)

    async def record_tool_stats(self, group: str, tool: str, observation: Observation, half_life: float | None) -> None:
        """Add a tool policy's ``observation`` to ``(group, tool)``'s statistics, atomically."""
        from ._stats import record_tool_stats

        await record_tool_stats(self, group, tool, observation, half_life)

    async def save_declaration(self, run_id: str, declared: Mapping[str, Any]) -> None:
        """Keep a plan an agent run declared (``declare_plan``), as the model sent it, for `toolplan audit`."""
        body = dumps(dict(declared))
        if len(body) > 1_000_000:
            raise StoreError(f"A declared plan of {len(body)} characters is too large to store (at most 1,000,000).")
        d = t.declarations

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                last = conn.execute(sa.select(sa.func.max(d.c.seq)).where(d.c.run_id == run_id)).scalar()
                conn.execute(sa.insert(d).values(run_id=run_id, seq=(last or 0) + 1, body=body, created_at=time.time()))

        await self.db.transact(write)

    async def declarations(self, run_id: str) -> list[dict[str, Any]]:
        """The plans agent run ``run_id`` declared, in order (each as the model sent it)."""
        d = t.declarations

        def read(engine: sa.Engine) -> list[dict[str, Any]]:
            with engine.connect() as conn:
                rows = conn.execute(sa.select(d.c.body).where(d.c.run_id == run_id).order_by(d.c.seq))
                return [loads(r.body) for r in rows]

        return await self.db.read(read)  # type: ignore[no-any-return]

    async def events(self, run_id: str, *, after: int = 0, limit: int = 10_000) -> list[StoredEvent]:
        """The run's events numbered above ``after``, in order."""

        def read(engine: sa.Engine, _raw: Any) -> list[StoredEvent]:
            ev = t.events
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.select(ev).where(ev.c.execution_id == run_id, ev.c.seq > after).order_by(ev.c.seq).limit(limit)
                ).mappings()
                return [
                    StoredEvent(
                        run_id=run_id,
                        seq=r["seq"],
                        type=r["type"],
                        step_id=r["step_id"],
                        payload=loads(r["payload"]),
                        at=r["at"],
                    )
                    for r in rows
                ]

        return await self.db.read(lambda engine: read(engine, None))  # type: ignore[no-any-return]


def new_run_id() -> str:
    """A fresh run id: ``run_{unix time}_{16 hex digits}`` (sortable by creation time)."""
    return f"run_{int(time.time())}_{os.urandom(8).hex()}"


_HOST = socket.gethostname()[:60]


def _dead_here(owner: str) -> bool:
    """True when ``owner`` names a process of this machine that no longer exists (its lease need not be waited out)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != _HOST or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (owned by another user) or cannot be asked
        return False
    return False


def _version(row: Mapping[Any, Any]) -> PlanVersion:
    issues = loads(row["issues"]) if row["issues"] else []
    return PlanVersion(
        plan_id=row["id"],
        parent_id=row["parent_id"],
        plan=decode(row["body"]) if row["body"] and row["body"] != "null" else None,
        text=row["text"] or "",
        issues=tuple(
            PlanIssue(code=i["code"], message=i["message"], step=i.get("step"), severity=i.get("severity", "error"))
            for i in issues
        ),
        valid=bool(row["valid"]),
    )


def _not_found(run_id: str) -> RunNotFoundError:
    return RunNotFoundError(
        f"No run {run_id!r} is stored here. `toolplan runs list --db URL` shows the stored runs.", run_id=run_id
    )


def _shown(url: sa.URL) -> str:
    """The URL as the user wrote it (no driver name), password hidden."""
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def _masked(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<invalid url>"


def _open(engine: sa.Engine) -> None:
    try:
        _migrate(engine)
    except StoreError:
        raise
    except (sa.exc.SQLAlchemyError, OSError) as exc:
        lines = str(exc).strip().splitlines()
        detail = f"{type(exc).__name__}: {lines[0][:300].rstrip('.')}" if lines else type(exc).__name__
        raise StoreError(
            f"The store at {_shown(engine.url)} could not be opened ({detail}). Check the URL, that the "
            "database server is running, and that the file's folder exists."
        ) from None


def _migrate(engine: sa.Engine) -> None:
    """`migrate`, again after a short wait when SQLite refuses a lock without waiting for it.

    SQLite skips its busy handler where waiting could deadlock (stores opening one new file at once
    may meet there): the migration's transaction is then started again, for at most about 20 s.
    Runs on the store's own thread, so the waits block no event loop.
    """
    for attempt in range(40):
        try:
            t.migrate(engine)
            return
        except sa.exc.OperationalError as exc:
            locked = engine.dialect.name == "sqlite" and "locked" in str(exc.orig)
            if not locked or attempt == 39:
                raise
            time.sleep(min(0.01 * 2**attempt, 0.5))


def _insert(engine: sa.Engine, table: sa.Table) -> Any:
    if engine.dialect.name == "postgresql":
        return pg_dialect.insert(table)
    return sqlite_dialect.insert(table)


class _Claim:
    """`Store.begin` on the database thread: store the plan, create or claim the execution, load its steps."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        body: str | None,
        limits: str,
        parent: str | None,
        reopen: bool = False,
        *,
        dialect: str = "native",
        fresh: bool = False,
    ) -> None:
        self.store, self.run_id, self.body, self.reopen = store, run_id, body, reopen
        self.limits, self.parent, self.dialect, self.fresh = limits, parent, dialect, fresh
        self.plan_id = STREAMING if body is None else plan_id(body)
        self.claimed = False
        self.next_seq = 1
        self.session = 1  # the run's session this claim opens (one more than the stored run's)

    def __call__(self, engine: sa.Engine, raw: Any) -> StoredRun | None:
        if self.fresh:  # an id made here is new: two inserts on the write connection, nothing to load
            self._create(raw)
            return None
        for _ in range(2):  # a process that created the same id in between: claim it then
            try:
                return self._claim(engine)
            except sa.exc.IntegrityError:
                continue
        raise RunConflictError(f"Run {self.run_id!r} is being created by another process.", run_id=self.run_id)

    def _create(self, raw: Any) -> None:
        cur = raw.cursor()
        try:
            for sql, params in self.store.new_run_statements(
                self.run_id, self.body, self.dialect, self.limits, self.parent
            ):
                cur.execute(sql, params)
            raw.commit()
        except BaseException:
            raw.rollback()
            raise
        finally:
            cur.close()
        self.claimed = True

    def _claim(self, engine: sa.Engine) -> StoredRun | None:
        store, e = self.store, t.executions
        now = time.time()
        with engine.begin() as conn:
            if self.body is not None:
                plan = plan_row(self.body, now, self.dialect)
                conn.execute(_insert(engine, t.plans).values(**plan).on_conflict_do_nothing())
            row = conn.execute(sa.select(e).where(e.c.id == self.run_id)).mappings().first()
            if row is None:
                conn.execute(
                    sa.insert(e).values(
                        id=self.run_id,
                        plan_id=self.plan_id,
                        parent_id=self.parent,
                        status="running",
                        limits=self.limits,
                        calls=0,
                        cost=0.0,
                        owner=store.owner,
                        lease_until=now + store.lease,
                        created_at=now,
                        updated_at=now,
                        session=1,
                    )
                )
                self.claimed = True
                return None
            if row["plan_id"] != self.plan_id and row["plan_id"] != STREAMING:
                raise RunConflictError(
                    f"Run {self.run_id!r} was stored with another plan ({row['plan_id']}, not {self.plan_id}). "
                    "Resume it with its own plan (toolplan runs resume ID), or give this plan a new run id.",
                    run_id=self.run_id,
                )
            if row["status"] not in ("succeeded", "failed") or self.reopen:
                free = sa.or_(e.c.owner.is_(None), e.c.owner == store.owner, e.c.lease_until < now)
                if row["owner"] is not None and _dead_here(row["owner"]):  # its process died on this machine
                    free = sa.or_(free, e.c.owner == row["owner"])
                # Unfinished still: its owner may have finished it (and let go of it) since it was read.
                # (A reopen, asked for by rerun_unknown, takes a finished run back on purpose.)
                unfinished = sa.true() if self.reopen else e.c.status.not_in(("succeeded", "failed"))
                session = conn.execute(
                    sa.update(e)
                    .where(e.c.id == self.run_id, unfinished, free)
                    .values(
                        owner=store.owner,
                        lease_until=now + store.lease,
                        status="running",
                        updated_at=now,
                        session=e.c.session + 1,
                    )
                    .returning(e.c.session)
                ).scalar()
                if session is not None:
                    self.claimed, self.session = True, int(session)
                else:
                    row = conn.execute(sa.select(e).where(e.c.id == self.run_id)).mappings().one()
                    if row["status"] not in ("succeeded", "failed"):
                        left = max(0.0, (row["lease_until"] or now) - now)
                        raise RunConflictError(
                            f"Run {self.run_id!r} is being run by another process ({row['owner']}); its lease ends "
                            f"in {left:.0f}s if that process has died. Try again then.",
                            run_id=self.run_id,
                        )
            seq = conn.execute(
                sa.select(sa.func.max(t.events.c.seq)).where(t.events.c.execution_id == self.run_id)
            ).scalar()
            self.next_seq = int(seq or 0) + 1
            return _stored(conn, self.run_id, row)


STREAMING = "streaming"  # the plan id of a streamed run whose plan has not arrived whole


def plan_id(body: str) -> str:
    """The id of an encoded plan: equal plans share one row."""
    return f"plan_{plan_hash(body)[:24]}"


_PLAN_COLUMNS = ("id", "version", "hash", "dialect", "body", "created_at")


def plan_row(body: str, now: float, dialect: str) -> dict[str, Any]:
    """The row of an encoded plan in ``toolplan_plans``."""
    digest = plan_hash(body)
    return {
        "id": f"plan_{digest[:24]}",
        "version": 1,
        "hash": digest,
        "dialect": dialect,
        "body": body,
        "created_at": now,
    }


def _load_output(conn: sa.Connection, row: Mapping[Any, Any]) -> Any:
    text = row["output"]
    if row["output_blob"]:
        text = conn.execute(sa.select(t.blobs.c.data).where(t.blobs.c.id == row["output_blob"])).scalar()
    return loads(text, max_chars=1 << 62) if text else None


def _step_rows(conn: sa.Connection, run_id: str) -> list[Mapping[Any, Any]]:
    s = t.steps
    return list(conn.execute(sa.select(s).where(s.c.execution_id == run_id)).mappings())


def _stored(conn: sa.Connection, run_id: str, row: Mapping[Any, Any]) -> StoredRun:
    """What the store holds of run ``row``.

    A step whose outcome (`_ENDED`) was written in an earlier session of the run than its latest is
    marked ``reused``: a resume took its record as it was, without calling its tool.
    """
    steps: dict[str, StoredStep] = {}
    latest = row["session"]
    for r in _step_rows(conn, run_id):
        status = r["status"]
        ended = status not in ("pending", "running")
        record = None
        if ended:
            output = _load_output(conn, r) if status == "succeeded" else None
            record = step_from_row(r, output, reused=r["session"] < latest and status in _ENDED)
        steps[r["step_id"]] = StoredStep(
            id=r["step_id"],
            status=status,
            attempt=r["attempt"],
            call_tool=r["call_tool"],
            fallback=bool(r["fallback"]),
            result=record,
        )
    result = None
    if row["status"] in ("succeeded", "failed") and row["result"]:
        plan = _plan_of(conn, row, steps)
        result = _plan_result(run_id, plan, row, {sid: s.result for sid, s in steps.items() if s.result})
    return StoredRun(
        run_id=run_id, status=row["status"], steps=steps, calls=row["calls"], cost=row["cost"], result=result
    )


def _plan_of(conn: sa.Connection, row: Mapping[Any, Any], steps: Mapping[str, StoredStep]) -> Plan:
    """The run's plan; for a streamed plan that never arrived whole, its steps that started."""
    body = conn.execute(sa.select(t.plans.c.body).where(t.plans.c.id == row["plan_id"])).scalar()
    if body is not None:
        return decode(body)  # type: ignore[no-any-return]
    return Plan(steps=tuple(Step(id=sid, tool=s.call_tool) for sid, s in steps.items()))


def _plan_result(run_id: str, plan: Plan, row: Mapping[Any, Any], records: Mapping[str, StepResult]) -> PlanResult:
    facts = loads(row["result"]) if row["result"] else {}
    steps: dict[str, StepResult] = {}
    for step in plan.steps:
        record = records.get(step.id)
        steps[step.id] = record or StepResult(id=step.id, tool=step.tool, status="pending")
    status: PlanStatus = row["status"] if row["status"] in ("succeeded", "failed", "cancelled") else "failed"
    return PlanResult(
        status=status,
        steps=steps,
        output_steps=tuple(o for o in plan.outputs if o in steps),
        run_id=run_id,
        dialect=plan.dialect,
        started_at=float(facts.get("started_at") or row["created_at"]),
        ended_at=float(facts.get("ended_at") or row["updated_at"]),
        deps={k: tuple(v) for k, v in (facts.get("deps") or {}).items()},
        warnings=tuple(PlanIssue(**w) for w in facts.get("warnings") or ()),
    )


def _summary(row: Mapping[Any, Any], steps: int, succeeded: int, calls: int) -> RunSummary:
    return RunSummary(
        run_id=row["id"],
        status=row["status"],
        plan_id=row["plan_id"],
        parent_id=row["parent_id"],
        steps=steps,
        succeeded=succeeded,
        calls=calls,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        owner=row["owner"],
        lease_until=row["lease_until"],
        source_plan_id=row.get("source_plan_id"),
        cancel_requested=bool(row.get("cancel_requested")),
    )


def _load_info(engine: sa.Engine, run_id: str) -> RunInfo:
    e = t.executions
    with engine.connect() as conn:
        row = conn.execute(sa.select(e).where(e.c.id == run_id)).mappings().first()
        if row is None:
            raise _not_found(run_id)
        stored = _stored(conn, run_id, row)
        plan = _plan_of(conn, row, stored.steps)
    records = {sid: s.result for sid, s in stored.steps.items() if s.result is not None}
    for sid, s in stored.steps.items():
        if s.result is None:
            records[sid] = StepResult(id=sid, tool=s.call_tool, status=s.status, attempts=s.attempt)  # type: ignore[arg-type]
    result = _plan_result(run_id, plan, row, records)
    total = len(plan.steps)
    return RunInfo(
        summary=_summary(
            row, total, sum(1 for r in result.steps.values() if r.ok), sum(s.attempt for s in stored.steps.values())
        ),
        plan=plan,
        limits=decode(row["limits"]),
        result=result,
    )


def _list(engine: sa.Engine, limit: int, status: str | None) -> list[RunSummary]:
    e, s = t.executions, t.steps
    counts = (
        sa.select(
            s.c.execution_id,
            sa.func.count().label("n"),
            sa.func.sum(sa.case((s.c.status == "succeeded", 1), else_=0)).label("ok"),
            sa.func.sum(s.c.attempt).label("calls"),
        )
        .group_by(s.c.execution_id)
        .subquery()
    )
    query = (
        sa.select(e, counts.c.n, counts.c.ok, counts.c.calls.label("calls_began"))
        .select_from(e.outerjoin(counts, counts.c.execution_id == e.c.id))
        .order_by(e.c.created_at.desc(), e.c.id.desc())
        .limit(max(1, min(int(limit), 10_000)))
    )
    if status is not None:
        query = query.where(e.c.status == status)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings()
        return [_summary(r, int(r["n"] or 0), int(r["ok"] or 0), int(r["calls_began"] or 0)) for r in rows]


class _Journal:
    """The journal of one durable run in a `Store` (see `toolplan.execute.Journal`).

    Writes that nobody waits for (a finished step, a skipped one, an event) gather in a buffer that
    goes to the database thread at the end of the event loop's turn, or with the next write that is
    waited for (a step about to call its tool): a chain's result and its dependent's ``running`` row
    then commit in one transaction, in that order, and a tick that ends many steps commits once.
    """

    __slots__ = (
        "_buffer",
        "_future",
        "_store",
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

    def __init__(self, store: Store, run_id: str, *, claimed: bool, next_seq: int, session: int = 1) -> None:
        self._store = store
        self.run_id = run_id
        self.session = session  # the run's session this process holds: written on every step row
        self.owner = store.owner
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
        return self._store.sql_lease, (until, now, self.calls, self.cost, self.run_id, self.owner)

    def _event(self, kind: str, step_id: str | None, payload: Mapping[str, Any], at: float) -> Statement:
        self.seq += 1
        return self._store.sql_event, (self.run_id, self.seq, kind, step_id, dumps(payload), at)

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
        self._store.db.write(self, statements, future)

    def event(self, kind: str, step_id: str | None, payload: Mapping[str, object]) -> None:
        self._add([self._event(kind, step_id, payload, time.time())])

    def plan_complete(self, plan: Plan) -> None:
        store, body = self._store, encode(plan)
        self._add(
            [
                store.plan_statement(body, plan.dialect, time.time()),
                (store.sql_plan_of, (plan_id(body), self.run_id)),
            ]
        )

    def started(self, step_id: str, tool: str, attempt: int, fallback: bool, at: float) -> asyncio.Future[None]:
        key = f"{self.run_id}:{step_id}:fallback" if fallback else f"{self.run_id}:{step_id}"
        payload: dict[str, Any] = {"tool": tool, "attempt": attempt}
        if fallback:
            payload["fallback"] = True
        future = self._add(
            [
                (
                    self._store.sql_started,
                    (self.run_id, step_id, tool, tool, attempt, int(fallback), key, at, self.session),
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
                statements.append((self._store.sql_blob, (blob, self.run_id, output)))
                output = None
        error = r.error
        params = (
            self.run_id,
            r.id,
            r.tool,
            r.tool,
            r.status,
            r.attempts,
            0,
            f"{self.run_id}:{r.id}",
            output,
            blob,
            note,
            error.kind if error else None,
            error.message if error else None,
            r.started_at,
            r.ended_at,
            int(r.used_fallback),
            dumps(list(r.warnings)) if r.warnings else None,
            dumps(r.arguments) if r.arguments is not None else None,
            self.session,
        )
        statements.append((sql, params))
        payload: dict[str, Any] = {"status": r.status, "attempts": r.attempts}
        if r.error is not None:
            payload["error"] = r.error.to_dict()
        statements.append(self._event("step_finished", r.id, payload, time.time()))
        return statements

    def finished(self, result: StepResult, calls: int, cost: float) -> asyncio.Future[None]:
        self.calls, self.cost = calls, cost  # kept up to date in the run's row when its lease is renewed
        return self._add(self._row(result, self._store.sql_finished))

    def ended(self, result: StepResult) -> None:
        self._add(self._row(result, self._store.sql_ended))

    async def close(self, result: PlanResult | None, calls: int, cost: float) -> None:
        if not self.claimed:
            return
        self.calls, self.cost = calls, cost
        if self.run_id in self._store._handed_back:
            self._store._handed_back.discard(self.run_id)
            if result is None:  # stopped by its process's end: for another process to take up
                await self._hand_back()
                return
        status = "cancelled" if result is None else result.status
        facts: str | None = None
        if result is not None:
            facts = dumps(
                {
                    "started_at": result.started_at,
                    "ended_at": result.ended_at,
                    "deps": {k: list(v) for k, v in result.deps.items()},
                    "warnings": [{"code": w.code, "message": w.message, "step": w.step} for w in result.warnings],
                }
            )
        await self._release(status, facts)

    async def release(self, status: str) -> None:
        """Let go of the run without finishing it (``queued``: for a worker to take)."""
        await self._release(status, None)

    async def _release(self, status: str, facts: str | None) -> None:
        store = self._store
        kind = "plan_finished" if status in ("succeeded", "failed", "cancelled") else f"run_{status}"
        now = time.time()
        end = self._event(kind, None, {"status": status}, now)
        await self._last([end, (store.sql_close, (status, facts, now, self.calls, self.cost, self.run_id, self.owner))])

    async def _hand_back(self) -> None:
        store = self._store
        now = time.time()
        self.seq += 1
        end = (store.sql_hand_back_event, (self.seq, now, self.run_id, self.owner))
        await self._last([end, (store.sql_hand_back, (now, self.calls, self.cost, self.run_id, self.owner))])

    async def _last(self, statements: list[Statement]) -> None:
        """Write the run's last ``statements`` (its end and its release) and close the journal."""
        try:
            if self.broken is None:
                future = self._add(statements)
                self._flush()
                await future
        finally:
            self._store.db.unregister(self)
            self.broken = "The run was closed."
