"""`ScheduleTools`: the model-facing tools that schedule a plan to run later, list, change and delete schedules."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any, Literal

from .._defaults import DEFAULT_PAGE_SIZE
from .._errors import PlanNotFoundError, PlanValidationError, ToolError, UserError
from .._json import dumps, loads
from ..execute import RunLimits
from ..plan import Plan, compile_plan, parse_plan
from ..planner import Planner
from ..store import Store
from ..tools import FunctionTool, ToolAnnotations, ToolRegistry, Toolset, ToolsLike
from ._store import ScheduleStore
from ._when import next_after, parse_when, zone

__all__ = ("ScheduleTools",)

_MAX_PLAN_CHARS = 256 * 1024
_MAX_TASK_CHARS = 8000
_MAX_NAME = 200
_MAX_LIST = 500
_PLAN_ID = re.compile(r"plan_[A-Za-z0-9_.-]{1,120}")


class ScheduleTools(Toolset):
    """Schedule plans to run later: ``schedule_create``, ``schedule_list``, ``schedule_update``, ``schedule_delete``.

    A schedule stores its plan (validated against ``tools`` when given), or an agent task that the
    scheduler's planner turns into a plan at each firing, and fires it as a queued durable run at
    each due time: a cron expression, an interval, a delay or a time (see docs/schedules.md). A
    `Scheduler` (``toolplan scheduler``, or ``toolplan serve``) fires them.

    Args:
        store: The store the schedules and their runs live in.
        tools: The tools scheduled plans may call; a plan naming another tool is refused when it is
            scheduled. None checks only the plan's structure.
        limits: The limits of each run a schedule starts (a plan's own limits can only tighten them).
        clock: Wall-clock seconds now (tests pass their own).
        prefix: Put in front of every function name (see `Toolset`).
        planner: The planner that task schedules are for: with one, ``schedule_create(task=...)`` is
            accepted; without, refused (the scheduler firing it would have no model to plan with).
            The scheduler's own planner plans each firing.
    """

    def __init__(
        self,
        store: Store,
        tools: ToolsLike | None = None,
        *,
        limits: RunLimits | None = None,
        clock: Callable[[], float] = time.time,
        prefix: str = "",
        planner: Planner | None = None,
    ) -> None:
        self.planner = planner
        self.rows = ScheduleStore(store)
        self.registry = ToolRegistry.of(tools) if tools is not None else None
        self.limits = limits or RunLimits()
        self.clock = clock
        read = ToolAnnotations(read_only=True, idempotent=True)
        super().__init__(
            [
                FunctionTool(self.schedule_create, annotations=ToolAnnotations()),
                FunctionTool(self.schedule_list, annotations=read),
                FunctionTool(self.schedule_update, annotations=ToolAnnotations(idempotent=True)),
                FunctionTool(self.schedule_delete, annotations=ToolAnnotations(destructive=True, idempotent=True)),
            ],
            prefix=prefix,
        )

    async def _plan(self, plan: dict[str, Any] | str) -> Plan:
        if isinstance(plan, str) and _PLAN_ID.fullmatch(plan.strip()):  # a stored plan, by id
            try:
                plan = (await self.rows.store.get_plan(plan.strip())).to_dict()
            except PlanNotFoundError as exc:
                raise ToolError(f"{exc.message} Pass the plan itself, or the id of a stored plan.") from exc
        text = plan if isinstance(plan, str) else dumps(plan)
        if len(text) > _MAX_PLAN_CHARS:
            raise ToolError(f"The plan is {len(text)} characters; a scheduled plan may have at most {_MAX_PLAN_CHARS}.")
        try:
            source = loads(text) if isinstance(plan, str) else plan
            if self.registry is not None:
                return compile_plan(source, self.registry, max_steps=self.limits.max_steps).plan
            return parse_plan(source)
        except PlanValidationError as exc:
            problems = "; ".join(i.message for i in exc.issues[:10])
            raise ToolError(f"The plan cannot be scheduled: {problems}") from exc
        except ValueError as exc:
            raise ToolError(f"plan is not JSON: {exc}. Pass the plan as an object or as JSON text.") from exc

    async def schedule_create(
        self,
        name: str,
        plan: dict[str, Any] | str | None = None,
        when: str = "",
        timezone: str = "UTC",
        catch_up: Literal["once", "skip"] = "once",
        task: str | None = None,
    ) -> dict[str, Any]:
        """Schedule a plan, or a task to plan then, to run later, once or repeatedly. Returns the schedule.

        Pass exactly one of plan and task. The result has the schedule's id and next time.

        Args:
            name: A short name for the schedule.
            plan: The plan to run (the same format as execute_tool_plan's), as an object or JSON text, or
                the id of a stored plan ('plan_...').
            when: Required. A cron expression ('0 9 * * 1-5'), an interval ('every 30m'), a delay ('in 90s')
                or a time ('2026-12-01T09:00').
            timezone: The IANA time zone cron expressions and times are read in.
            catch_up: A time missed while no scheduler ran fires once ('once') or not at all ('skip').
            task: Instead of a plan, a task in plain words ('Sum yesterday's orders'), planned into a plan
                with the tools at each firing.
        """
        if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
            raise ToolError(f"name must be a non-empty string of at most {_MAX_NAME} characters.")
        if (plan is None) == (task is None):
            raise ToolError(
                "Pass exactly one of plan (a plan, or a stored plan's id) and task (a task in plain words), "
                f"not {'both' if plan is not None else 'neither'}."
            )
        parsed = await self._plan(plan) if plan is not None else None
        if task is not None:
            task = self._task(task)
        now = self.clock()
        w = parse_when(when, timezone, now)
        row = await self.rows.create(
            schedule_id=f"sch_{int(now)}_{os.urandom(4).hex()}",
            name=name.strip(),
            kind=w.kind,
            spec=w.spec,
            timezone=timezone,
            plan=parsed,
            limits=self.limits,
            catch_up=catch_up,
            next_at=w.first,
            task=task,
        )
        return row.to_dict()

    def _task(self, task: str) -> str:
        if not isinstance(task, str) or not task.strip() or len(task) > _MAX_TASK_CHARS:
            raise ToolError(f"task must be a non-empty string of at most {_MAX_TASK_CHARS} characters.")
        if self.planner is None:
            raise ToolError(
                "Tasks cannot be scheduled here: there is no planner model to turn them into plans. Pass a plan "
                "instead, or give ScheduleTools(..., planner=Planner(model, tools)) and run the scheduler with "
                "--model."
            )
        return task.strip()

    async def schedule_list(self, limit: int = DEFAULT_PAGE_SIZE) -> list[dict[str, Any]]:
        """List the schedules, soonest first, with their next time (Unix seconds) and firings so far.

        Args:
            limit: Most schedules listed (1-500).
        """
        limit = max(1, min(int(limit), _MAX_LIST))
        return [row.to_dict() for row in await self.rows.listing(limit=limit)]

    async def schedule_update(
        self,
        schedule_id: str,
        when: str | None = None,
        timezone: str | None = None,
        enabled: bool | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Change a schedule: its time, time zone or name, or pause (enabled=false) and resume it.

        Args:
            schedule_id: The schedule's id (from schedule_create or schedule_list).
            when: A new cron expression, interval, delay or time; its next time counts from now.
            timezone: A new IANA time zone.
            enabled: False pauses the schedule; true resumes it from its next time after now.
            name: A new name.
        """
        try:
            row = await self.rows.get(schedule_id)
        except UserError as exc:
            raise ToolError(exc.message) from exc
        values: dict[str, Any] = {}
        now = self.clock()
        tz = timezone if timezone is not None else row.timezone
        zone(tz)
        if when is not None:
            w = parse_when(when, tz, now)
            values |= {"kind": w.kind, "spec": w.spec, "next_at": w.first}
        elif timezone is not None and row.kind == "cron":
            values["next_at"] = next_after(row.kind, row.spec, tz, now)
        if timezone is not None:
            values["timezone"] = tz
        if name is not None:
            if not name.strip() or len(name) > _MAX_NAME:
                raise ToolError(f"name must be a non-empty string of at most {_MAX_NAME} characters.")
            values["name"] = name.strip()
        if enabled is not None:
            values["enabled"] = 1 if enabled else 0
            resumed = enabled and not row.enabled and "next_at" not in values
            if resumed and row.next_at is not None and row.next_at < now and row.kind != "once":
                values["next_at"] = next_after(row.kind, row.spec, tz, now)  # from its next time after now
        if not values:
            return row.to_dict()
        return (await self.rows.update(schedule_id, **values)).to_dict()

    async def schedule_delete(self, schedule_id: str) -> dict[str, Any]:
        """Delete a schedule; runs it started stay. Deleting one that is gone is not an error.

        Args:
            schedule_id: The schedule's id.
        """
        return {"schedule_id": schedule_id, "deleted": await self.rows.delete(schedule_id)}
