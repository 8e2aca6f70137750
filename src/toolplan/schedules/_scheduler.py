"""`Scheduler`: fires due schedules as queued durable runs, once each, with any number of schedulers.

Each `tick` reads the schedules due at the clock's time and fires each by one compare-and-set
transaction (`ScheduleStore.fire`): the schedule moves to its next time, the firing is recorded,
and the run is stored ``queued`` with the schedule as its parent. Whoever runs queued runs (the
service, ``toolplan runs work``, ``toolplan scheduler --tools``) then runs it like any durable run:
a crash mid-run resumes, finished steps are not repeated.

Catch-up rule: a schedule found due more than ``misfire_grace`` seconds late (no scheduler ran)
fires **once** for all the times it missed (``catch_up="once"``, the default; the firing's
``missed`` counts the others, up to 100 for a cron schedule), or not at all (``catch_up="skip"``:
the firing is recorded with no run). Either way it then moves to its first time after now.

A task schedule (``schedule_create(task=...)``) is planned first, by the scheduler's `Planner`,
outside the transaction; its plan is then queued by the same compare-and-set transaction as a
stored plan. When there is no planner, the model fails, or the plan is still invalid after the
planner's repair, the firing is recorded with its ``error`` and no run; the schedule moves on to
its next time (a model that is down does not make a schedule fire again and again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from .._errors import ToolError, ToolplanError
from ..plan import Plan
from ..planner import Planner
from ..store import Store
from ._store import Firing, ScheduleRow, ScheduleStore
from ._when import catch_up

__all__ = ("Scheduler",)

log = logging.getLogger("toolplan.schedules")

_MAX_ERROR = 2000


class Scheduler:
    """Fires the due schedules of a store.

    Args:
        store: The store holding the schedules (and the runs they start).
        clock: Wall-clock seconds (Unix time) now; tests pass their own.
        misfire_grace: Seconds late a firing may be and still count as on time (a firing later than
            that follows the schedule's ``catch_up``).
        batch: Most schedules fired per tick.
        planner: Turns task schedules into plans at each firing (``Planner(model, tools)``); without
            it a task schedule's firings are recorded as failed.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        misfire_grace: float = 60.0,
        batch: int = 100,
        planner: Planner | None = None,
    ) -> None:
        self.store = store
        self.rows = ScheduleStore(store)
        self.clock = clock
        self.misfire_grace = misfire_grace
        self.batch = batch
        self.planner = planner

    async def tick(self) -> list[Firing]:
        """Fire every schedule due now; returns the firings this scheduler made (others' are not)."""
        now = self.clock()
        made: list[Firing] = []
        for schedule in await self.rows.due(now, limit=self.batch):
            firing = await self._fire(schedule, now)
            if firing is not None:
                made.append(firing)
        return made

    async def _fire(self, schedule: ScheduleRow, now: float) -> Firing | None:
        due = schedule.next_at
        assert due is not None  # `due` lists only schedules with a next time
        late = now - due > self.misfire_grace
        when = (schedule.kind, schedule.spec, schedule.timezone, due, now)
        try:
            # Catching up walks up to CATCH_UP_COUNT cron times: in a thread, the loop keeps serving
            next_at, missed = await asyncio.to_thread(catch_up, *when) if late else catch_up(*when)
        except ToolError:  # a row that no longer parses (edited by hand): stop it rather than fire it forever
            await self.rows.update(schedule.schedule_id, enabled=0)
            return None
        run_id = None if late and schedule.catch_up == "skip" else f"{schedule.schedule_id}-{round(due * 1000)}"
        plan: Plan | None = None
        error: str | None = None
        if run_id is not None and schedule.task is not None:
            plan, error = await self._plan_task(schedule.task)
            if plan is None:
                run_id = None
        fired = await self.rows.fire(
            schedule, next_at=next_at, run_id=run_id, missed=missed, now=now, owner=self.store.owner,
            plan=plan, error=error,
        )  # fmt: skip
        if not fired:
            return None
        if error is not None:
            log.warning("toolplan scheduler: schedule %s started no run: %s", schedule.schedule_id, error)
        return Firing(
            schedule_id=schedule.schedule_id, due_at=due, run_id=run_id, fired_at=now, missed=missed, error=error
        )

    async def _plan_task(self, task: str) -> tuple[Plan | None, str | None]:
        """The plan the planner makes of ``task``, or why there is none."""
        if self.planner is None:
            return None, (
                "This scheduler has no planner to turn the schedule's task into a plan: start it with "
                "--model PROVIDER:NAME (or Scheduler(store, planner=Planner(model, tools)))."
            )
        try:
            draft = await self.planner.plan(task)
        except ToolplanError as exc:
            return None, f"The planner failed: {' '.join(exc.message.split())}"[:_MAX_ERROR]
        except Exception as exc:  # a model client's own failure: record it, fire again at the next time
            return None, f"The planner failed: {type(exc).__name__}: {exc}"[:_MAX_ERROR]
        if not draft.valid or draft.plan is None:
            problems = "; ".join(str(i) for i in draft.errors[:10]) or "no plan could be read"
            return None, f"The planner's plan is invalid after its repair ({draft.plan_id}): {problems}"[:_MAX_ERROR]
        return draft.plan, None

    async def run(self, *, poll: float = 1.0, stop: asyncio.Event | None = None) -> None:
        """Tick every ``poll`` seconds until ``stop`` is set (or the task is cancelled)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:  # the store failed: say so and try again on the next tick
                log.exception("toolplan scheduler: firing due schedules failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await stop.wait()
