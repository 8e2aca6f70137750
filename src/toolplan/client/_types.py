"""What the client returns: frozen records read from the service's JSON answers.

Each ``from_json`` takes the answer as the service sends it and ignores keys it does not know, so a
newer service still works with this client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from .._errors import PlanIssue, Severity
from ..execute import ApprovalRequest, StepResult
from ..models import Usage

__all__ = (
    "Event",
    "Execution",
    "ExecutionSummary",
    "PlanSummary",
    "PlanVersion",
    "Planned",
    "Request",
    "RequestSummary",
    "StoredPlan",
)

FINISHED = frozenset({"succeeded", "failed", "cancelled"})


def _issues(rows: Any, default: Severity = "error") -> tuple[PlanIssue, ...]:
    return tuple(PlanIssue.from_dict(row, severity=default) for row in rows or ())


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """An execution of a stored plan.

    The answer of `Client.execute` that did not finish within ``wait`` is a snapshot of the queued
    execution: its id, plan id and status, no steps yet (``created_at`` None). `Client.get_execution`
    reads the whole record.

    Attributes:
        execution_id: ``exec_...``.
        plan_id: The plan it runs (the id it was asked to run).
        status: ``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``.
        steps: Every step's record so far (the same `toolplan.StepResult` a local run gives).
        outputs: The output steps' values, once it has finished.
        calls: Tool calls begun.
        cancel_requested: A cancel was asked and the process running it has not stopped it yet.
        created_at: When it was queued (Unix seconds).
        updated_at: Its last change.
        approval: For status ``pending_approval``: the steps that wait for an answer (`Client.approve`).
    """

    execution_id: str
    plan_id: str | None
    status: str
    steps: tuple[StepResult, ...] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict[str, Any])
    calls: int = 0
    cancel_requested: bool = False
    created_at: float | None = None
    updated_at: float | None = None
    approval: ApprovalRequest | None = None

    @property
    def finished(self) -> bool:
        """True once it has succeeded, failed or been cancelled."""
        return self.status in FINISHED

    @property
    def ok(self) -> bool:
        """True when it succeeded."""
        return self.status == "succeeded"

    def step(self, step_id: str) -> StepResult:
        """The record of step ``step_id`` (KeyError if it has none yet)."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Execution:
        return cls(
            execution_id=data["execution_id"],
            plan_id=data.get("plan_id"),
            status=data["status"],
            steps=tuple(StepResult.from_dict(s) for s in data.get("steps") or ()),
            outputs=dict(data.get("outputs") or {}),
            calls=data.get("calls") or 0,
            cancel_requested=bool(data.get("cancel_requested", False)),
            created_at=data.get("created_at"),
            updated_at=data.get("updated_at"),
            approval=ApprovalRequest.from_dict(data["approval"]) if data.get("approval") else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSummary:
    """A row of `Client.list_executions` (`Client.get_execution` has the steps and outputs)."""

    execution_id: str
    plan_id: str | None
    status: str
    parent_id: str | None
    calls: int
    created_at: float
    updated_at: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutionSummary:
        return cls(
            execution_id=data["execution_id"],
            plan_id=data.get("plan_id"),
            status=data["status"],
            parent_id=data.get("parent_id"),
            calls=data.get("calls") or 0,
            created_at=data["created_at"],
            updated_at=data["updated_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredPlan:
    """A stored plan: posted with `Client.create_plan`, or a version the planner wrote.

    Attributes:
        plan_id: ``plan_...``.
        plan: The plan (native form) as JSON data; None for a planner draft that did not parse.
        dialect: The dialect it was written in.
        valid: False for a planner draft with errors (it cannot run).
        issues: Its problems (a planner draft's), errors and warnings.
        warnings: Warnings found when it was posted (`Client.create_plan` only).
        request_id: The planning request it belongs to, if any.
        parent_id: The version it repairs, if any.
        created_at: When it was stored (None in `Client.create_plan`'s answer).
    """

    plan_id: str
    plan: Mapping[str, Any] | None
    dialect: str | None = None
    valid: bool = True
    issues: tuple[PlanIssue, ...] = ()
    warnings: tuple[PlanIssue, ...] = ()
    request_id: str | None = None
    parent_id: str | None = None
    created_at: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredPlan:
        return cls(
            plan_id=data["plan_id"],
            plan=data.get("plan"),
            dialect=data.get("dialect"),
            valid=bool(data.get("valid", True)),
            issues=_issues(data.get("issues")),
            warnings=_issues(data.get("warnings"), "warning"),
            request_id=data.get("request_id"),
            parent_id=data.get("parent_id"),
            created_at=data.get("created_at"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanSummary:
    """A row of `Client.list_plans` (`Client.get_plan` has the plan itself)."""

    plan_id: str
    version: int | None
    parent_id: str | None
    request_id: str | None
    dialect: str | None
    valid: bool
    created_at: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanSummary:
        return cls(
            plan_id=data["plan_id"],
            version=data.get("version"),
            parent_id=data.get("parent_id"),
            request_id=data.get("request_id"),
            dialect=data.get("dialect"),
            valid=bool(data.get("valid", True)),
            created_at=data["created_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """The answer of `Client.plan`: a question turned into a valid, stored plan.

    Attributes:
        request_id: ``req_...``: the question and every version of its plan (`Client.get_request`).
        plan_id: The final (valid) version, ready for `Client.execute`.
        parent_id: The first version when this one repairs it, else None.
        plan: The plan (native form) as JSON data.
        issues: Its warnings.
        repaired: True when the model's first plan was invalid and the repair is this one.
        usage: Model requests and tokens used.
        money: What the planning cost at the service's prices; None when it has none.
    """

    request_id: str
    plan_id: str
    parent_id: str | None
    plan: Mapping[str, Any]
    issues: tuple[PlanIssue, ...]
    repaired: bool
    usage: Usage
    money: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Planned:
        usage = data.get("usage") or {}
        return cls(
            request_id=data["request_id"],
            plan_id=data["plan_id"],
            parent_id=data.get("parent_id"),
            plan=data["plan"],
            issues=_issues(data.get("issues")),
            repaired=bool(data.get("repaired", False)),
            usage=Usage(
                requests=usage.get("requests", 0),
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                cached_input_tokens=usage.get("cached_input_tokens", 0),
                cache_write_tokens=usage.get("cache_write_tokens", 0),
            ),
            money=data.get("money"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanVersion:
    """One version of a request's plan (the planner's first, or its repair)."""

    plan_id: str
    parent_id: str | None
    plan: Mapping[str, Any] | None
    issues: tuple[PlanIssue, ...]
    valid: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A planning request: the question and every version of its plan, oldest first.

    Attributes:
        request_id: ``req_...``.
        query: The question.
        plan_id: The final version (None when no valid plan came out of it).
        versions: Every version; a repair names its parent.
        created_at: When it was asked.
    """

    request_id: str
    query: str
    plan_id: str | None
    versions: tuple[PlanVersion, ...]
    created_at: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Request:
        versions = tuple(
            PlanVersion(
                plan_id=v["plan_id"],
                parent_id=v.get("parent_id"),
                plan=v.get("plan"),
                issues=_issues(v.get("issues")),
                valid=bool(v.get("valid", False)),
            )
            for v in data.get("versions") or ()
        )
        return cls(
            request_id=data["request_id"],
            query=data["query"],
            plan_id=data.get("plan_id"),
            versions=versions,
            created_at=data["created_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSummary:
    """A row of `Client.list_requests`."""

    request_id: str
    query: str
    plan_id: str | None
    created_at: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestSummary:
        return cls(
            request_id=data["request_id"],
            query=data["query"],
            plan_id=data.get("plan_id"),
            created_at=data["created_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One event of an execution, as its server-sent event stream gives it.

    Attributes:
        seq: Its number: 1, 2, 3, ... with no gap, per execution (the stream's event id).
        type: ``plan_started``, ``run_queued``, ``run_started``, ``run_resumed``, ``step_started``, ``step_finished``,
            ``plan_finished``, ...
        step_id: The step it concerns, if any.
        payload: What the event says (a finished step's status, the plan's final status, ...).
        at: When it happened (Unix seconds).
    """

    seq: int
    type: str
    step_id: str | None
    payload: Any
    at: float

    @property
    def final(self) -> bool:
        """True for ``plan_finished``: the execution has ended (until a resume)."""
        return self.type == "plan_finished"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            seq=int(data["seq"]),
            type=str(data["type"]),
            step_id=data.get("step_id"),
            payload=data.get("payload"),
            at=cast(float, data.get("at")),
        )
