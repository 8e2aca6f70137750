"""Taking runs: creating or claiming one for this process, the next run that needs a process, queueing one.

`Claim` is `Store.begin` on the database thread, `claim_next` is `Store.claim_next`, and
`insert_queued` queues a run for a worker inside another transaction (the service's, a schedule's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .._errors import RunConflictError
from .._json import dumps
from ..execute import RunLimits
from ..execute._internal import StoredRun
from ..plan import Plan
from . import _schema as t
from ._codec import encode
from ._connect import HOST, dead_here, dialect_insert
from ._journal import RunWrites
from ._reads import stored_run
from ._records import STREAMING, plan_id, plan_row

__all__ = ("Claim", "Taken", "claim_next", "insert_queued")


_e = t.executions
# The statements of a claim, built once (building one costs more than running it on SQLite).
# A run that needs a process. Checked again by the UPDATE: a run listed here may have been
# taken, or even finished (its owner NULL again), by another process since.
_BASE = (_e.c.status.in_(("queued", "running")), _e.c.plan_id != STREAMING)
_NEEDS = (*_BASE, sa.or_(_e.c.owner.is_(None), _e.c.lease_until < sa.bindparam("now")))
_LISTED = sa.select(_e.c.id, _e.c.owner).where(*_NEEDS).order_by(_e.c.created_at).limit(sa.bindparam("n"))
_HELD_HERE = sa.select(_e.c.id, _e.c.owner).where(*_BASE, _e.c.owner.like(sa.bindparam("host"))).limit(200)
_TAKE = {"owner": sa.bindparam("owner"), "lease_until": sa.bindparam("until"), "status": "running"}
_TAKE_NEEDED = (
    sa.update(_e).where(_e.c.id == sa.bindparam("run_id"), *_NEEDS).values(**_TAKE, updated_at=sa.bindparam("now"))
)
_TAKE_DEAD = (
    sa.update(_e)
    .where(_e.c.id == sa.bindparam("run_id"), *_BASE, _e.c.owner == sa.bindparam("dead"))
    .values(**_TAKE, updated_at=sa.bindparam("at"))
)


def claim_next(writes: RunWrites, engine: sa.Engine, skip: set[str], dead_local: bool) -> Taken | str | None:
    """`Store.claim_next` in one worker thread's transactions: the run taken (`Taken`, or its id alone), or None."""
    now = time.time()
    with engine.begin() as conn:
        listed = conn.execute(_LISTED, {"now": now, "n": 20 + len(skip)})
        candidates: list[tuple[Any, str | None]] = [(c[0], None) for c in listed if c[0] not in skip]
        if dead_local and not candidates:
            held_here = conn.execute(_HELD_HERE, {"host": f"{HOST}:%"})
            candidates = [(c[0], c[1]) for c in held_here if c[0] not in skip and dead_here(c[1])]
    take = {"owner": writes.owner, "until": now + writes.lease}
    for run_id, dead in candidates:
        with engine.begin() as conn:
            if dead is not None:
                taken = conn.execute(_TAKE_DEAD, {"run_id": run_id, "dead": dead, "at": now, **take}).rowcount
            else:
                taken = conn.execute(_TAKE_NEEDED, {"run_id": run_id, "now": now, **take}).rowcount
            if taken == 1:  # held by this process now: its `begin` (resume) takes it up with what is read here
                return _taken(conn, str(run_id), now)
    return None


@dataclass(slots=True, eq=False)
class Taken:
    """A run `claim_next` took, and what its resume needs, read in the claim's transaction.

    `Store.plan_of` and `Store.begin` use it instead of reading the run again: the process holds
    the run (its lease) from the claim on, so nothing else has written its steps since. ``session``
    is the session its begin opens, written with the begin's first event (``sql_session``).
    """

    run_id: str
    plan_id: str
    body: str
    limits: str
    stored: StoredRun
    next_seq: int
    session: int
    at: float  # when the claim set the lease
    plan: Plan | None = None  # ``body`` decoded by `Store.plan_of`
    decoded_limits: RunLimits | None = None


_RUN_ROW = sa.select(t.executions).where(t.executions.c.id == sa.bindparam("run_id"))
_PLAN_BODY = sa.select(t.plans.c.body).where(t.plans.c.id == sa.bindparam("plan_id"))
_LAST_SEQ = sa.select(sa.func.max(t.events.c.seq)).where(t.events.c.execution_id == sa.bindparam("run_id"))


def _taken(conn: sa.Connection, run_id: str, now: float) -> Taken | str:
    """What the resume of ``run_id``, just taken in ``conn``'s transaction, needs (its id alone: a streamed plan)."""
    row = conn.execute(_RUN_ROW, {"run_id": run_id}).mappings().one()
    body = conn.execute(_PLAN_BODY, {"plan_id": row["plan_id"]}).scalar() if row["plan_id"] != STREAMING else None
    if body is None or body == "null" or row["limits"] is None:
        return run_id  # its resume reads (and reports) it as usual
    seq = conn.execute(_LAST_SEQ, {"run_id": run_id}).scalar()
    return Taken(
        run_id=run_id,
        plan_id=str(row["plan_id"]),
        body=str(body),
        limits=str(row["limits"]),
        stored=stored_run(conn, run_id, row),
        next_seq=int(seq or 0) + 1,
        session=int(row["session"] or 0) + 1,
        at=now,
    )


class Claim:
    """`Store.begin` on the database thread: store the plan, create or claim the execution, load its steps."""

    def __init__(
        self,
        writes: RunWrites,
        run_id: str,
        body: str | None,
        limits: str,
        parent: str | None,
        reopen: bool = False,
        *,
        dialect: str = "native",
        fresh: bool = False,
    ) -> None:
        self.writes, self.run_id, self.body, self.reopen = writes, run_id, body, reopen
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
            for sql, params in self.writes.new_run_statements(
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
        writes, e = self.writes, t.executions
        now = time.time()
        with engine.begin() as conn:
            if self.body is not None:
                plan = plan_row(self.body, now, self.dialect)
                conn.execute(dialect_insert(engine, t.plans).values(**plan).on_conflict_do_nothing())
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
                        owner=writes.owner,
                        lease_until=now + writes.lease,
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
                free = sa.or_(e.c.owner.is_(None), e.c.owner == writes.owner, e.c.lease_until < now)
                if row["owner"] is not None and dead_here(row["owner"]):  # its process died on this machine
                    free = sa.or_(free, e.c.owner == row["owner"])
                # Unfinished still: its owner may have finished it (and let go of it) since it was read.
                # (A reopen, asked for by rerun_unknown, takes a finished run back on purpose.)
                unfinished = sa.true() if self.reopen else e.c.status.not_in(("succeeded", "failed"))
                session = conn.execute(
                    sa.update(e)
                    .where(e.c.id == self.run_id, unfinished, free)
                    .values(
                        owner=writes.owner,
                        lease_until=now + writes.lease,
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
            return stored_run(conn, self.run_id, row)


def insert_queued(
    conn: sa.Connection,
    run_id: str,
    plan: Plan,
    body: str,
    limits: RunLimits,
    now: float,
    *,
    parent_id: str | None = None,
    api_key: str | None = None,
    source_plan_id: str | None = None,
) -> None:
    """Insert a queued execution of ``plan`` (encoded ``body``) in ``conn``'s transaction, for a worker to claim.

    Its plan row (if not stored yet), its row and its first two events (``plan_started``,
    ``run_queued``), as `Store.submit` leaves a run; the service and the schedules use it.
    """
    e, ev = t.executions, t.events
    ref = plan_id(body)
    if conn.execute(sa.select(t.plans.c.id).where(t.plans.c.id == ref)).first() is None:
        conn.execute(sa.insert(t.plans).values(**plan_row(body, now, plan.dialect)))
    conn.execute(
        sa.insert(e).values(
            id=run_id,
            plan_id=ref,
            parent_id=parent_id,
            status="queued",
            limits=encode(limits),
            calls=0,
            cost=0.0,
            owner=None,
            lease_until=None,
            created_at=now,
            updated_at=now,
            api_key=api_key,
            source_plan_id=source_plan_id,
            cancel_requested=0,
        )
    )
    started = {"plan_id": source_plan_id or ref, "steps": list(plan.step_ids)}
    conn.execute(
        sa.insert(ev),
        [
            {"execution_id": run_id, "seq": 1, "type": "plan_started", "step_id": None,
             "payload": dumps(started), "at": now},
            {"execution_id": run_id, "seq": 2, "type": "run_queued", "step_id": None,
             "payload": dumps({"status": "queued"}), "at": now},
        ],
    )  # fmt: skip
