"""The rows of schedules and their firings (`toolplan.schedules`), and the one transaction that fires.

A firing is a compare-and-set: the schedule's ``next_at`` moves on only if it still holds the due
time this process read, and the firing's row and its queued run are inserted in that same
transaction. Two schedulers on one database (PostgreSQL's row lock, SQLite's single writer) can
both see a schedule due; exactly one of them updates it, the other's update matches no row and it
inserts nothing. The firing's primary key (schedule, due time) is a second guard.

A schedule's target is a stored plan (``plan_id``) or an agent task (``task``, with ``plan_id``
empty): the scheduler plans a task first and hands the plan to the same transaction, or records
the firing's ``error`` and queues no run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .._errors import StoreError, UserError
from ..execute import RunLimits
from ..plan import Plan
from ..store import Store
from ..store import _internal as t
from ..store._internal import decode, encode, insert_queued, plan_id, plan_row

__all__ = ("Firing", "ScheduleRow", "ScheduleStore")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRow:
    """A stored schedule.

    Attributes:
        schedule_id: Its id (``sch_...``).
        name: A name for people.
        kind: ``cron``, ``every`` or ``once``.
        spec: The cron expression, the interval in seconds, or the time (ISO 8601).
        timezone: The IANA time zone its times are read in.
        plan_id: The stored plan it runs, or None when its target is a task.
        catch_up: What a firing missed while no scheduler ran does: ``once`` or ``skip``.
        next_at: When it fires next (Unix seconds), or None (done, or a cron with no next time).
        enabled: False while paused.
        fired: Firings so far (runs started).
        created_at: When it was made (Unix seconds).
        task: The agent task a planner turns into a plan at each firing, or None when it runs a plan.
    """

    schedule_id: str
    name: str
    kind: str
    spec: str
    timezone: str
    plan_id: str | None
    catch_up: str
    next_at: float | None
    enabled: bool
    fired: int
    created_at: float
    task: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON data, for the model and the CLI."""
        return {
            "schedule_id": self.schedule_id,
            "name": self.name,
            "kind": self.kind,
            "spec": self.spec,
            "timezone": self.timezone,
            "plan_id": self.plan_id,
            "task": self.task,
            "catch_up": self.catch_up,
            "next_at": self.next_at,
            "enabled": self.enabled,
            "fired": self.fired,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Firing:
    """One due time of a schedule: the run it started (None when it was skipped as missed, or failed).

    ``error`` says why a task's firing started no run (no planner, the model failed, or its plan
    was invalid after the planner's repair); None otherwise.
    """

    schedule_id: str
    due_at: float
    run_id: str | None
    fired_at: float
    missed: int
    error: str | None = None


def _row(r: Any) -> ScheduleRow:
    return ScheduleRow(
        schedule_id=r["id"],
        name=r["name"],
        kind=r["kind"],
        spec=r["spec"],
        timezone=r["timezone"],
        plan_id=r["plan_id"] or None,
        catch_up=r["catch_up"],
        next_at=r["next_at"],
        enabled=bool(r["enabled"]),
        fired=int(r["fired"]),
        created_at=float(r["created_at"]),
        task=r["task"],
    )


class ScheduleStore:
    """Schedules and firings in a `Store` (their tables are part of its schema)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(
        self,
        *,
        schedule_id: str,
        name: str,
        kind: str,
        spec: str,
        timezone: str,
        plan: Plan | None,
        limits: RunLimits,
        catch_up: str,
        next_at: float | None,
        task: str | None = None,
    ) -> ScheduleRow:
        """Store a schedule and its plan (or its task: ``plan=None``), in one transaction."""
        body = encode(plan) if plan is not None else None
        now = time.time()
        s = t.schedules

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                ref = ""
                if plan is not None and body is not None:
                    ref = plan_id(body)
                    if conn.execute(sa.select(t.plans.c.id).where(t.plans.c.id == ref)).first() is None:
                        conn.execute(sa.insert(t.plans).values(**plan_row(body, now, plan.dialect)))
                conn.execute(
                    sa.insert(s).values(
                        id=schedule_id, name=name, kind=kind, spec=spec, timezone=timezone, plan_id=ref,
                        limits=encode(limits), catch_up=catch_up, next_at=next_at, enabled=1, fired=0,
                        created_at=now, updated_at=now, task=task,
                    )
                )  # fmt: skip

        await self.store.db.transact(write)
        return await self.get(schedule_id)

    async def get(self, schedule_id: str) -> ScheduleRow:
        """The schedule ``schedule_id``.

        Raises:
            UserError: no schedule has that id.
        """
        s = t.schedules

        def read(engine: sa.Engine) -> Any:
            with engine.connect() as conn:
                return conn.execute(sa.select(s).where(s.c.id == schedule_id)).mappings().first()

        row = await self.store.db.read(read)
        if row is None:
            raise UserError(f"No schedule {schedule_id!r} is stored here: schedule_list shows the schedules.")
        return _row(row)

    async def listing(self, *, limit: int = 100) -> list[ScheduleRow]:
        """Schedules, soonest due first (those with no next time last)."""
        s = t.schedules

        def read(engine: sa.Engine) -> list[ScheduleRow]:
            query = sa.select(s).order_by(s.c.next_at.is_(None), s.c.next_at, s.c.id).limit(limit)
            with engine.connect() as conn:
                return [_row(r) for r in conn.execute(query).mappings()]

        return await self.store.db.read(read)  # type: ignore[no-any-return]

    async def update(self, schedule_id: str, **values: Any) -> ScheduleRow:
        """Change columns of a schedule (``name``, ``kind``, ``spec``, ``timezone``, ``next_at``, ``enabled``...)."""
        s = t.schedules

        def write(engine: sa.Engine) -> int:
            with engine.begin() as conn:
                return int(
                    conn.execute(
                        sa.update(s).where(s.c.id == schedule_id).values(**values, updated_at=time.time())
                    ).rowcount
                )

        if await self.store.db.transact(write) != 1:
            raise UserError(f"No schedule {schedule_id!r} is stored here: schedule_list shows the schedules.")
        return await self.get(schedule_id)

    async def delete(self, schedule_id: str) -> bool:
        """Delete a schedule (its firings and runs stay); False if there was none."""
        s = t.schedules

        def write(engine: sa.Engine) -> int:
            with engine.begin() as conn:
                return int(conn.execute(sa.delete(s).where(s.c.id == schedule_id)).rowcount)

        return bool(await self.store.db.transact(write) == 1)

    async def due(self, now: float, *, limit: int = 100) -> list[ScheduleRow]:
        """Enabled schedules whose next time is ``now`` or earlier, most overdue first."""
        s = t.schedules

        def read(engine: sa.Engine) -> list[ScheduleRow]:
            query = sa.select(s).where(s.c.enabled == 1, s.c.next_at <= now).order_by(s.c.next_at).limit(limit)
            with engine.connect() as conn:
                return [_row(r) for r in conn.execute(query).mappings()]

        return await self.store.db.read(read)  # type: ignore[no-any-return]

    async def fire(
        self,
        schedule: ScheduleRow,
        *,
        next_at: float | None,
        run_id: str | None,
        missed: int,
        now: float,
        owner: str,
        plan: Plan | None = None,
        error: str | None = None,
    ) -> bool:
        """Move ``schedule`` from its due time to ``next_at`` and queue run ``run_id`` (None: skip this one).

        ``plan`` is the plan a task schedule's planner made (a plan schedule runs its stored plan);
        ``error`` is recorded on a firing that starts no run.

        Returns False when another scheduler fired (or someone changed) the schedule first: nothing
        was written then.
        """
        s, f = t.schedules, t.schedule_firings
        due_at = schedule.next_at
        if due_at is None:
            return False

        def write(engine: sa.Engine) -> bool:
            with engine.begin() as conn:
                done = sa.select(f.c.run_id).where(f.c.schedule_id == schedule.schedule_id, f.c.due_at == due_at)
                again = conn.execute(done).first() is not None  # this due time fired before (a time set back)
                moved = conn.execute(
                    sa.update(s)
                    .where(s.c.id == schedule.schedule_id, s.c.next_at == due_at, s.c.enabled == 1)
                    .values(next_at=next_at, fired=s.c.fired + (1 if run_id and not again else 0), updated_at=now)
                ).rowcount
                if moved != 1 or again:  # taken by another scheduler; or moved on without firing twice
                    return False
                conn.execute(
                    sa.insert(f).values(
                        schedule_id=schedule.schedule_id, due_at=due_at, run_id=run_id, fired_at=now,
                        missed=missed, owner=owner, error=error,
                    )
                )  # fmt: skip
                if run_id is not None and plan is not None:  # a task's plan, planned before this transaction
                    limits_text = conn.execute(sa.select(s.c.limits).where(s.c.id == schedule.schedule_id)).scalar_one()
                    body = encode(plan)
                    insert_queued(conn, run_id, plan, body, decode(limits_text), now, parent_id=schedule.schedule_id)
                elif run_id is not None:
                    stored = conn.execute(
                        sa.select(t.plans.c.body, s.c.limits)
                        .select_from(s.join(t.plans, t.plans.c.id == s.c.plan_id))
                        .where(s.c.id == schedule.schedule_id)
                    ).first()
                    if stored is None:  # its plan row is gone: a database edited by hand
                        raise StoreError(f"The plan of schedule {schedule.schedule_id!r} is not stored.")
                    stored_plan: Plan = decode(stored[0])
                    limits: RunLimits = decode(stored[1])
                    insert_queued(conn, run_id, stored_plan, stored[0], limits, now, parent_id=schedule.schedule_id)
                return True

        return bool(await self.store.db.transact(write))

    async def firings(self, schedule_id: str | None = None, *, limit: int = 100) -> list[Firing]:
        """Firings, newest due time first (of one schedule, or of all)."""
        f = t.schedule_firings

        def read(engine: sa.Engine) -> list[Firing]:
            query = sa.select(f).order_by(f.c.due_at.desc(), f.c.schedule_id).limit(limit)
            if schedule_id is not None:
                query = query.where(f.c.schedule_id == schedule_id)
            with engine.connect() as conn:
                return [
                    Firing(
                        schedule_id=r["schedule_id"], due_at=float(r["due_at"]), run_id=r["run_id"],
                        fired_at=float(r["fired_at"]), missed=int(r["missed"]), error=r["error"],
                    )
                    for r in conn.execute(query).mappings()
                ]  # fmt: skip

        return await self.store.db.read(read)  # type: ignore[no-any-return]
