"""Reading stored runs: a run as the engine resumes it, everything about one run, the listing, events, plans.

Each function runs on a worker thread (`Database.read`) with a connection of its own.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from .._errors import PlanNotFoundError, StoreError
from .._json import loads
from ..execute import ApprovalRequest, RunLimits, StepResult, StoredStep
from ..execute._internal import StoredRun
from ..plan import Plan, Step
from . import _schema as t
from ._codec import decode, result_from_row, step_from_row
from ._records import ENDED, STREAMING, RunInfo, RunSummary, StoredEvent, not_found

__all__ = (
    "info_of",
    "list_runs",
    "load_info",
    "read_declarations",
    "read_events",
    "read_plan",
    "read_plan_and_limits",
    "stored_run",
)


# The statements of a status read, built once: building a statement and its cache key costs more
# than running it on SQLite.
_RUN = sa.select(t.executions).where(t.executions.c.id == sa.bindparam("run_id"))
_STEPS = sa.select(t.steps).where(t.steps.c.execution_id == sa.bindparam("run_id"))
_BLOB = sa.select(t.blobs.c.data).where(t.blobs.c.id == sa.bindparam("blob_id"))
_PLAN_BODY = sa.select(t.plans.c.body).where(t.plans.c.id == sa.bindparam("plan_id"))

PLANS_KEPT = 512  # decoded plans kept per store, by id
_plans: weakref.WeakKeyDictionary[sa.Engine, OrderedDict[str, Plan]] = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()


def _cached_plan(conn: sa.Connection, plan_id: str) -> Plan | None:
    """The plan stored under ``plan_id``, decoded once per store: a plan's row never changes (its id is its hash)."""
    engine = conn.engine
    with _plans_lock:
        kept = _plans.get(engine)
        if kept is not None and plan_id in kept:
            kept.move_to_end(plan_id)
            return kept[plan_id]
    body = conn.execute(_PLAN_BODY, {"plan_id": plan_id}).scalar()
    if body is None:
        return None
    decoded: Plan = decode(body)
    with _plans_lock:
        kept = _plans.setdefault(engine, OrderedDict())
        kept[plan_id] = decoded
        if len(kept) > PLANS_KEPT:
            kept.popitem(last=False)
    return decoded


def _load_output(conn: sa.Connection, row: Mapping[Any, Any]) -> Any:
    text = row["output"]
    if row["output_blob"]:
        text = conn.execute(_BLOB, {"blob_id": row["output_blob"]}).scalar()
    return loads(text, max_chars=1 << 62) if text else None


def _step_rows(conn: sa.Connection, run_id: str) -> list[Mapping[Any, Any]]:
    return list(conn.execute(_STEPS, {"run_id": run_id}).mappings())


def stored_run(conn: sa.Connection, run_id: str, row: Mapping[Any, Any]) -> StoredRun:
    """What the store holds of run ``row``.

    A step whose outcome (`ENDED`) was written in an earlier session of the run than its latest is
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
            record = step_from_row(r, output, reused=r["session"] < latest and status in ENDED)
        steps[r["step_id"]] = StoredStep(
            id=r["step_id"],
            status=status,
            attempt=r["attempt"],
            call_tool=r["call_tool"],
            fallback=int(r["fallback"]),
            result=record,
        )
    result = None
    if row["status"] in ("succeeded", "failed", "pending_approval") and row["result"]:
        plan = _plan_of(conn, row, steps)
        result = result_from_row(run_id, plan, row, {sid: s.result for sid, s in steps.items() if s.result})
    return StoredRun(
        run_id=run_id,
        status=row["status"],
        steps=steps,
        calls=row["calls"],
        cost=row["cost"],
        result=result,
        approval=_last_request(row, steps) if result is None else None,
    )


def _last_request(row: Mapping[Any, Any], steps: Mapping[str, StoredStep]) -> ApprovalRequest | None:
    """The request a run that waited stored, if some of its steps still wait (it was queued again since)."""
    if not row["result"] or not any(s.status == "pending_approval" for s in steps.values()):
        return None
    data = loads(row["result"]).get("approval")
    if not isinstance(data, dict):
        return None
    request = ApprovalRequest.from_dict(data)

    def still(sid: str, ready: bool) -> bool:  # waits still; or (ahead of time) has not ended
        step = steps.get(sid)
        if ready:
            return step is not None and step.status == "pending_approval"
        return step is None or step.status in ("pending", "pending_approval")

    kept = tuple(p for p in request.steps if still(p.step_id, p.ready))
    listed = {p.step_id for p in kept if p.ready}
    if not listed or any(s.status == "pending_approval" and sid not in listed for sid, s in steps.items()):
        return None  # asked since (its process stopped while asking): that request is not this one
    answered = {sid: a for sid, a in request.answered.items() if still(sid, False)}
    return dataclasses.replace(request, steps=kept, answered=answered)


def _plan_of(conn: sa.Connection, row: Mapping[Any, Any], steps: Mapping[str, StoredStep]) -> Plan:
    """The run's plan; for a streamed plan that never arrived whole, its steps that started."""
    plan = _cached_plan(conn, row["plan_id"])
    if plan is not None:
        return plan
    return Plan(steps=tuple(Step(id=sid, tool=s.call_tool) for sid, s in steps.items()))


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


def load_info(engine: sa.Engine, run_id: str) -> RunInfo:
    with engine.connect() as conn:
        row = conn.execute(_RUN, {"run_id": run_id}).mappings().first()
        if row is None:
            raise not_found(run_id)
        return info_of(conn, run_id, row)


def info_of(conn: sa.Connection, run_id: str, row: Mapping[Any, Any]) -> RunInfo:
    """Everything stored about run ``row`` (its row in toolplan_executions, read in ``conn``)."""
    stored = stored_run(conn, run_id, row)
    plan = _plan_of(conn, row, stored.steps)
    records = {sid: s.result for sid, s in stored.steps.items() if s.result is not None}
    for sid, s in stored.steps.items():
        if s.result is None:
            records[sid] = StepResult(id=sid, tool=s.call_tool, status=s.status, attempts=s.attempt)  # type: ignore[arg-type]
    result = result_from_row(run_id, plan, row, records)
    total = len(plan.steps)
    return RunInfo(
        summary=_summary(
            row, total, sum(1 for r in result.steps.values() if r.ok), sum(s.attempt for s in stored.steps.values())
        ),
        plan=plan,
        limits=decode(row["limits"]),
        result=result,
    )


def list_runs(engine: sa.Engine, limit: int, status: str | None) -> list[RunSummary]:
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


def read_plan(engine: sa.Engine, plan_id: str) -> Plan:
    """A stored plan, by id (a planner's ``plan_...`` id, or an execution's plan id)."""
    with engine.connect() as conn:
        body = conn.execute(sa.select(t.plans.c.body).where(t.plans.c.id == plan_id)).scalar()
    if body is None or body == "null":
        what = "is stored here" if body is None else "is a draft that could not be read as a plan"
        raise PlanNotFoundError(f"No plan {plan_id!r} {what}.", plan_id=plan_id)
    return decode(body)  # type: ignore[no-any-return]


def read_plan_and_limits(engine: sa.Engine, run_id: str) -> tuple[Plan, RunLimits]:
    """The plan and limits run ``run_id`` was stored with."""
    e = t.executions
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(t.plans.c.body, e.c.limits).join(t.plans, t.plans.c.id == e.c.plan_id).where(e.c.id == run_id)
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
        raise not_found(run_id)
    return decode(row[0]), decode(row[1])


def read_declarations(engine: sa.Engine, run_id: str) -> list[tuple[float, dict[str, Any]]]:
    """The plans agent run ``run_id`` declared, in order, each with the time it was stored."""
    d = t.declarations
    with engine.connect() as conn:
        rows = conn.execute(sa.select(d.c.created_at, d.c.body).where(d.c.run_id == run_id).order_by(d.c.seq))
        return [(r.created_at, loads(r.body)) for r in rows]


def read_events(engine: sa.Engine, run_id: str, after: int, limit: int) -> list[StoredEvent]:
    """The run's events numbered above ``after``, in order."""
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
