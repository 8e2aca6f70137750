"""`Store`: plans, executions, step runs and events in SQLite or PostgreSQL; `open_store` makes one."""

from __future__ import annotations

import asyncio
import importlib
import os
import time
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from .._defaults import DEFAULT_LEASE, DEFAULT_PAGE_SIZE, MAX_LEASE, MIN_LEASE
from .._errors import RunConflictError, StoreError, UserError
from .._json import dumps
from ..execute import RunLimits, ToolLatency
from ..execute._internal import StoredRun, check_run_id
from ..plan import Plan, parse_plan
from ..policy import ArmStats, Observation
from . import _cache, _reads, _stats
from . import _schema as t
from ._claim import Claim, Taken, claim_next
from ._codec import decode, encode
from ._connect import HOST, make_engine, masked, open_database
from ._db import Database
from ._journal import KNOWN_PLANS, Journal, RunWrites
from ._records import STREAMING, RunInfo, RunSummary, StoredEvent, new_run_id, plan_id

__all__ = ("Store", "open_store")


def open_store(url: str = "sqlite:///toolplan.db", *, lease: float = DEFAULT_LEASE) -> Store:
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


class Store:
    """Durable runs in one database. Made by `open_store`; implements `toolplan.execute.RunStore`."""

    def __init__(self, url: str, *, lease: float = DEFAULT_LEASE) -> None:
        if not (isinstance(lease, int | float) and MIN_LEASE <= lease <= MAX_LEASE) or isinstance(lease, bool):
            raise UserError(f"lease must be a number of seconds from {MIN_LEASE} to {MAX_LEASE:.0f}, not {lease!r}.")
        self.url = url
        self.lease = float(lease)
        self.owner = f"{HOST}:{os.getpid()}:{os.urandom(4).hex()}"
        # Per-run costs a store need not pay again (a service runs the same plan many times): the
        # rows of plans it committed (kept by `RunWrites`), and the text of limits met before.
        self._limits_text: dict[int, tuple[RunLimits, str]] = {}  # by id(): each kept alive, so its id is its own
        self.db = Database(make_engine(url), lease=self.lease, opener=open_database)
        self.writes = RunWrites(self.db, owner=self.owner, lease=self.lease)
        # Runs `claim_next` took, with what their resume needs (read in the claim's transaction), until it begins.
        self._taken: dict[str, Taken] = {}
        self._sql_session = self.db.sql("UPDATE toolplan_executions SET session = ? WHERE id = ? AND owner = ?")

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
        self.writes.handed_back.add(run_id)

    def keep(self, run_id: str) -> None:
        """Undo `hand_back`: a cancel of ``run_id`` stores it ``cancelled`` again."""
        self.writes.handed_back.discard(run_id)

    @property
    def url_shown(self) -> str:
        """The URL with any password hidden."""
        return masked(self.url)

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
    ) -> tuple[Journal, StoredRun | None]:
        """Claim run ``run_id`` (new when None) for this process; see `toolplan.execute.RunStore`."""
        fresh = run_id is None
        run_id = new_run_id() if run_id is None else check_run_id(run_id)
        taken = self._taken.pop(run_id, None) if not fresh else None
        if taken is not None and time.time() - taken.at > self.lease / 3:
            taken = None  # not taken up at once: claimed again below, as any resume
        if (
            taken is not None
            and not reopen
            and parent is None
            and plan is not None
            and (plan is taken.plan or plan_id(encode(plan)) == taken.plan_id)
        ):
            return self._take_up(taken), taken.stored
        body = encode(plan) if plan is not None else None
        dialect = plan.dialect if plan is not None else "native"
        if fresh and self.db.opened:  # a new id: nothing to look up, so no round trip (see `_create_later`)
            return self._create_later(run_id, plan, body, dialect, self._encode_limits(limits), parent), None
        limits_text = self._encode_limits(limits)
        claim = Claim(self.writes, run_id, body, limits_text, parent, reopen, dialect=dialect, fresh=fresh)
        claimed_at = time.time()
        stored: StoredRun | None = await self.db.call(claim)
        journal = Journal(self.writes, run_id, claimed=claim.claimed, next_seq=claim.next_seq, session=claim.session)
        journal.renewed_at = claimed_at  # the claim's lease was set after this moment
        if stored is not None:  # every write renews the lease with the counters: they go on from the stored ones
            journal.calls, journal.cost = stored.calls, stored.cost
        if claim.claimed:
            self.db.register(journal)
            if stored is None:
                steps = list(plan.step_ids) if plan is not None else []
                journal.event("plan_started", None, {"plan_id": claim.plan_id, "steps": steps})
            elif claim.session == 1:  # the first claim of a queued run (the service's, a schedule's) starts it
                journal.event("run_started", None, {"owner": self.owner})
            else:
                journal.event("run_resumed", None, {"owner": self.owner})
        return journal, stored

    def _take_up(self, taken: Taken) -> Journal:
        """The journal of a run `claim_next` took: what `Claim` would read was read by the claim.

        The run's new session is written with its first event, in the transaction that renews its
        lease (fenced: a process that lost the run meanwhile writes neither, and stops running it).
        """
        run_id = taken.run_id
        journal = Journal(self.writes, run_id, claimed=True, next_seq=taken.next_seq, session=taken.session)
        # renewed_at stays 0: its first commit renews (and checks) the lease the claim set.
        journal.calls, journal.cost = taken.stored.calls, taken.stored.cost
        self.db.register(journal)
        journal._add([(self._sql_session, (taken.session, run_id, self.owner))])
        journal.event("run_started" if taken.session == 1 else "run_resumed", None, {"owner": self.owner})
        return journal

    def _create_later(
        self, run_id: str, plan: Plan | None, body: str | None, dialect: str, limits: str, parent: str | None
    ) -> Journal:
        """The journal of a new run whose rows are written with its first writes, in their transaction.

        A fresh id cannot be taken, so the run's rows need no round trip of their own: they go first
        in the journal's buffer, and the first step's ``running`` row commits with them (its call
        waits for that commit, as always). Until they commit, the run has no lease to check.
        """
        writes = self.writes
        journal = Journal(writes, run_id, claimed=True, next_seq=1)
        journal.creating = True
        plan_ref = plan_id(body) if body is not None else STREAMING
        created = journal._add(writes.new_run_statements(run_id, body, dialect, limits, parent, plan_ref=plan_ref))
        if body is not None and plan_ref not in writes.plans_stored:
            created.add_done_callback(lambda done: writes.plan_stored(done, plan_ref))
        self.db.register(journal)
        steps = list(plan.step_ids) if plan is not None else []
        journal.event("plan_started", None, {"plan_id": plan_ref, "steps": steps})
        return journal

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
        if len(self._limits_text) >= KNOWN_PLANS:
            self._limits_text.clear()
        self._limits_text[id(limits)] = (limits, text)
        return text

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
        writes = self.writes
        taken = await self.db.transact(lambda engine: claim_next(writes, engine, set(skip), dead_local))
        if not isinstance(taken, Taken):
            return taken  # type: ignore[no-any-return]
        if len(self._taken) >= KNOWN_PLANS:  # claims never taken up (a caller that did not resume them)
            self._taken.clear()
        self._taken[taken.run_id] = taken
        return taken.run_id

    # -- planning requests: the planner's (`toolplan.planner`) ------------------------------------

    async def save_request(self, request_id: str, query: str, versions: Any, *, usage: Any = None) -> None:
        """Deprecated: a `toolplan.planner.Planner` given this store keeps its requests itself."""
        _moved("Store.save_request", "a Planner given this store (Planner(..., store=store)) keeps its requests")
        await _planner_store().save_request(self, request_id, query, versions, usage=usage)

    async def get_request(self, request_id: str) -> Any:
        """Deprecated: ``toolplan.planner.get_request(store, request_id)``."""
        _moved("Store.get_request", "use toolplan.planner.get_request(store, request_id)")
        return await _planner_store().get_request(self, request_id)

    # -- reading ---------------------------------------------------------------------------------

    async def plan_of(self, run_id: str) -> tuple[Plan, RunLimits]:
        """The plan and limits run ``run_id`` was stored with.

        Raises:
            RunNotFoundError: no run has that id.
        """
        taken = self._taken.get(run_id)
        if taken is not None:  # just claimed here: read by the claim
            if taken.plan is None or taken.decoded_limits is None:
                taken.plan, taken.decoded_limits = decode(taken.body), decode(taken.limits)
            return taken.plan, taken.decoded_limits
        return await self.db.read(lambda engine: _reads.read_plan_and_limits(engine, run_id))  # type: ignore[no-any-return]

    async def get_plan(self, plan_id: str) -> Plan:
        """A stored plan, by id (a planner's ``plan_...`` id, or an execution's plan id).

        Raises:
            PlanNotFoundError: no plan has that id, or it is a draft that did not parse.
        """
        return await self.db.read(lambda engine: _reads.read_plan(engine, plan_id))  # type: ignore[no-any-return]

    async def get_run(self, run_id: str) -> RunInfo:
        """Everything stored about ``run_id``.

        Raises:
            RunNotFoundError: no run has that id.
        """
        return await self.db.read(lambda engine: _reads.load_info(engine, run_id))  # type: ignore[no-any-return]

    async def list_runs(self, *, limit: int = DEFAULT_PAGE_SIZE, status: str | None = None) -> list[RunSummary]:
        """The most recent runs first (at most ``limit``), optionally only those with ``status``."""
        return await self.db.read(lambda engine: _reads.list_runs(engine, limit, status))  # type: ignore[no-any-return]

    async def events(self, run_id: str, *, after: int = 0, limit: int = 10_000) -> list[StoredEvent]:
        """The run's events numbered above ``after``, in order."""
        return await self.db.read(lambda engine: _reads.read_events(engine, run_id, after, limit))  # type: ignore[no-any-return]

    # -- tool statistics (the toolplan.policy.StatsStore protocol) ------------------------------------

    async def load_tool_stats(self, group: str) -> dict[str, ArmStats]:
        """A tool policy's stored statistics of ``group``'s tools, by tool (as last updated)."""
        return await _stats.load_tool_stats(self.db, group)

    async def record_tool_stats(self, group: str, tool: str, observation: Observation, half_life: float | None) -> None:
        """Add a tool policy's ``observation`` to ``(group, tool)``'s statistics, atomically."""
        await _stats.record_tool_stats(self.db, group, tool, observation, half_life)

    async def tool_latencies(self, tools: Sequence[str]) -> dict[str, ToolLatency]:
        """Mean seconds per call of each of ``tools`` in stored runs (`toolplan.execute.LatencyStats`, for dry runs)."""
        return await _stats.tool_latencies(self.db, tools)

    # -- a result cache's entries (the toolplan.execute.CacheStore protocol) ---------------------------

    async def cache_get(self, key: str, now: float) -> tuple[str, float] | None:
        """A `toolplan.ResultCache` entry: its JSON text and when it was kept, unless expired at ``now``."""
        return await _cache.cache_get(self.db, key, now)

    async def cache_put(self, key: str, tool: str, value: str, stored_at: float, expires_at: float) -> None:
        """Keep a `toolplan.ResultCache` entry until ``expires_at`` (epoch seconds)."""
        await _cache.cache_put(self.db, key, tool, value, stored_at, expires_at)

    # -- declared plans (`toolplan audit`) ------------------------------------------------------------

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
        return [body for _at, body in await self.timed_declarations(run_id)]

    async def timed_declarations(self, run_id: str) -> list[tuple[float, dict[str, Any]]]:
        """The plans agent run ``run_id`` declared, in order, each with when it was declared (Unix seconds).

        A replanned run's calls are audited against the declaration in force when each was made.
        """
        return await self.db.read(lambda engine: _reads.read_declarations(engine, run_id))  # type: ignore[no-any-return]


def _moved(name: str, instead: str) -> None:
    warnings.warn(f"{name} is deprecated and will be removed in the next release: {instead}.", DeprecationWarning, 3)


def _planner_store() -> Any:
    """The planner's requests (`toolplan.planner`), for the deprecated methods above only (the store sits below it)."""
    return importlib.import_module("toolplan.planner._store")
