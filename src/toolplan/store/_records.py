"""What a store gives back about its runs, and the ids and rows shared by everything that writes runs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from .._errors import RunNotFoundError
from ..execute import PlanResult, RunLimits
from ..plan import Plan
from ._codec import plan_hash

__all__ = (
    "ENDED",
    "STREAMING",
    "RunInfo",
    "RunSummary",
    "StoredEvent",
    "new_run_id",
    "not_found",
    "plan_id",
    "plan_row",
)

ENDED = ("succeeded", "failed", "timed_out", "unknown_outcome", "rejected")  # a step's own outcome
STREAMING = "streaming"  # the plan id of a streamed run whose plan has not arrived whole


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


def new_run_id() -> str:
    """A fresh run id: ``run_{unix time}_{16 hex digits}`` (sortable by creation time)."""
    return f"run_{int(time.time())}_{os.urandom(8).hex()}"


def plan_id(body: str) -> str:
    """The id of an encoded plan: equal plans share one row."""
    return f"plan_{plan_hash(body)[:24]}"


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


def not_found(run_id: str) -> RunNotFoundError:
    """The error for a run id no row has."""
    return RunNotFoundError(
        f"No run {run_id!r} is stored here. `toolplan runs list --db URL` shows the stored runs.", run_id=run_id
    )
