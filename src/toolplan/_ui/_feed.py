"""A run's events in the planner service's JSON shape, kept for the live page (and replayed to it).

The service's event stream (``GET /v1/executions/{id}/events``) sends records
``{"seq", "type", "step_id", "payload", "at"}`` read from the store; `record_of` makes the same
records from the engine's `PlanEvent`s, so one page follows both a ``toolplan run --ui`` and a
service execution. `LiveFeed` numbers them, keeps them (a page opened late, or reconnecting with
``Last-Event-ID``, gets what it missed) and keeps the execution's step table up to date.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from ..execute import (
    ApprovalRequested,
    BudgetWarning,
    CacheHit,
    PlanEvent,
    PlanFinished,
    PlanStarted,
    StepFinished,
    StepResult,
    StepRetrying,
    StepStarted,
    ToolChosen,
)
from ..plan import CompiledPlan, Plan, validate_plan

__all__ = ("LiveFeed", "graph_view", "record_of")

_FINISHED = frozenset({"succeeded", "failed", "cancelled"})


def record_of(event: PlanEvent) -> tuple[str, str | None, dict[str, Any], float] | None:
    """``(type, step_id, payload, at)`` of an engine event, as a durable run stores it (None: not stored).

    The payloads are those of the store's journal (`toolplan.store`): the service streams those.
    """
    now = time.time()
    if isinstance(event, PlanStarted):
        return "plan_started", None, {"steps": list(event.steps)}, event.at
    if isinstance(event, StepStarted):
        return "step_started", event.step_id, {"tool": event.tool, "attempt": event.attempt}, event.at
    if isinstance(event, StepRetrying):
        payload = {"attempt": event.attempt, "error": event.error.to_dict(), "delay": event.delay}
        return "step_retrying", event.step_id, payload, now
    if isinstance(event, StepFinished):
        r = event.result
        finished: dict[str, Any] = {"status": r.status, "attempts": r.attempts}
        if r.error is not None:
            finished["error"] = r.error.to_dict()
        return "step_finished", r.id, finished, r.ended_at or now
    if isinstance(event, PlanFinished):
        return "plan_finished", None, {"status": event.result.status}, event.result.ended_at or now
    if isinstance(event, ToolChosen):
        return "tool_chosen", event.step_id, event.choice.to_dict(), event.at
    if isinstance(event, ApprovalRequested):
        return "approval_requested", None, event.request.to_dict(), event.at
    if isinstance(event, CacheHit):
        return "cache_hit", event.step_id, {"tool": event.tool, "age": event.age}, event.at
    if isinstance(event, BudgetWarning):  # a durable run does not store it
        return None
    raise TypeError(f"not a plan event: {event!r}")  # pragma: no cover - PlanEvent is closed


def graph_view(execution_id: str, plan: Plan | CompiledPlan) -> dict[str, Any]:
    """The plan's dependency graph as the live page draws it.

    ``{"execution_id", "steps": [{"id", "tool", "deps"}], "output_steps"}``: ``deps`` are the
    step's dependencies (its references and ``depends_on``), in plan order.
    """
    compiled = plan if isinstance(plan, CompiledPlan) else validate_plan(plan).compiled
    source = plan.plan if isinstance(plan, CompiledPlan) else plan
    deps: Mapping[str, tuple[str, ...]] = compiled.deps if compiled is not None else {}
    return {
        "execution_id": execution_id,
        "steps": [{"id": s.id, "tool": s.tool, "deps": list(deps.get(s.id, ()))} for s in source.steps],
        "output_steps": list(source.outputs),
    }


class LiveFeed:
    """The events of one run, numbered from 1, and its step table; safe to use from any thread.

    Pass it as ``on_event`` (it is called on the run's event loop); the live server's threads read
    it with `wait` and `execution`.

    Args:
        run_id: The run's id (the page's execution id).
        compiled: The run's compiled plan: its steps are listed, pending, before the run starts.
    """

    def __init__(self, run_id: str, compiled: CompiledPlan) -> None:
        self.run_id = run_id
        self.graph = graph_view(run_id, compiled)
        self._records: list[dict[str, Any]] = []
        self._steps: dict[str, dict[str, Any]] = {
            s["id"]: {"id": s["id"], "tool": s["tool"], "status": "pending", "attempts": 0} for s in self.graph["steps"]
        }
        self._results: dict[str, StepResult] = {}
        self._status = "queued"
        self._outputs: dict[str, Any] = {}
        self._created = self._updated = time.time()
        self._changed = threading.Condition()
        self._closed = False

    def __call__(self, event: PlanEvent) -> None:
        record = record_of(event)
        if record is None:
            return
        kind, step_id, payload, at = record
        with self._changed:
            self._records.append(
                {"seq": len(self._records) + 1, "type": kind, "step_id": step_id, "payload": payload, "at": at}
            )
            self._apply(event, at)
            self._changed.notify_all()

    def _apply(self, event: PlanEvent, at: float) -> None:
        self._updated = at
        if isinstance(event, PlanStarted):
            self._status = "running"
        elif isinstance(event, StepStarted):
            row = self._steps.setdefault(event.step_id, {"id": event.step_id, "tool": event.tool, "attempts": 0})
            row.update(tool=event.tool, status="running", attempts=event.attempt)
            row.setdefault("started_at", event.at)
        elif isinstance(event, StepFinished):
            r = event.result
            self._results[r.id] = r
            self._steps[r.id] = r.to_dict()
        elif isinstance(event, PlanFinished):
            self._status = event.result.status
            self._outputs = event.result.to_dict()["outputs"]

    def close(self) -> None:
        """No more events: wake every reader (they end their streams)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def finished(self) -> bool:
        """True once the plan's end was recorded."""
        with self._changed:
            return self._status in _FINISHED

    def wait(self, after: int, timeout: float) -> tuple[list[dict[str, Any]], bool]:
        """The records numbered above ``after`` (waiting up to ``timeout`` seconds for one), and whether it is over.

        The stream is over when the plan ended and the records hold its end, or the feed was closed.
        """
        with self._changed:
            self._changed.wait_for(lambda: len(self._records) > after or self._closed, timeout)
            out = self._records[after:]
            ended = self._closed or any(r["type"] == "plan_finished" for r in out)
            return out, ended

    def execution(self) -> dict[str, Any]:
        """The run as ``GET /v1/executions/{id}`` shows an execution: status, step table, outputs."""
        with self._changed:
            steps = [dict(row) for row in self._steps.values()]
            return {
                "execution_id": self.run_id,
                "plan_id": None,
                "status": self._status,
                "created_at": self._created,
                "updated_at": self._updated,
                "calls": sum(int(row.get("attempts") or 0) for row in steps),
                "cancel_requested": False,
                "steps": steps,
                "outputs": dict(self._outputs),
            }
