from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._approval import ApprovalRequest
from ._choice import Choice
from ._result import PlanResult, StepError, StepResult

__all__ = (
    "ApprovalRequested",
    "BudgetWarning",
    "CacheHit",
    "EventHandler",
    "PlanEvent",
    "PlanFinished",
    "PlanStarted",
    "StepFinished",
    "StepRetrying",
    "StepStarted",
    "ToolChosen",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStarted:
    """A plan began; ``steps`` lists its step ids in plan order."""

    kind: Literal["plan_started"] = "plan_started"
    run_id: str
    steps: tuple[str, ...]
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted:
    """A step's tool call started (``attempt`` counts from 1; fallbacks report their own tool)."""

    kind: Literal["step_started"] = "step_started"
    run_id: str
    step_id: str
    tool: str
    attempt: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRetrying:
    """A step failed and will be tried again after ``delay`` seconds."""

    kind: Literal["step_retrying"] = "step_retrying"
    run_id: str
    step_id: str
    attempt: int
    error: StepError
    delay: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinished:
    """A step reached a terminal state (including ``skipped`` and ``not_run``)."""

    kind: Literal["step_finished"] = "step_finished"
    run_id: str
    result: StepResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolChosen:
    """A step with alternatives was dispatched and ``choice.chosen`` will run (before its `StepStarted`)."""

    kind: Literal["tool_chosen"] = "tool_chosen"
    run_id: str
    step_id: str
    choice: Choice
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheHit:
    """A step's call was answered from the run's `ResultCache`: no call was made (before its `StepFinished`).

    ``age`` is how many seconds ago the result was kept.
    """

    kind: Literal["cache_hit"] = "cache_hit"
    run_id: str
    step_id: str
    tool: str
    age: float
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetWarning:
    """What a run spent first reached the budget's ``warn_at`` share of one of its limits.

    ``limit`` is ``max_tool_calls``, ``max_tool_calls_per_tool`` (``tool`` names which) or
    ``max_cost``; ``used`` of ``cap`` is what was spent when it was reserved, and ``scope`` says
    whose budget: ``"plan"`` (a plan's own) or ``"run"`` (the run's: a plain plan run's limits, or
    an agent run's ledger). One warning per limit and budget.
    """

    kind: Literal["budget_warning"] = "budget_warning"
    run_id: str
    limit: str
    used: float
    cap: float
    tool: str | None = None
    scope: str = "run"
    at: float

    @property
    def message(self) -> str:
        """A sentence for people and models: what was spent of which limit, and what to do."""
        share = self.used / self.cap if self.cap else 1.0
        if self.limit == "max_cost":
            spent = f"{self.used:g} of max_cost={self.cap:g} spent"
        elif self.tool is not None:
            spent = f"{self.used:g} of the {self.cap:g} calls of {self.tool!r} allowed made"
        else:
            spent = f"{self.used:g} of max_tool_calls={self.cap:g} calls made"
        return f"Budget warning: {spent} ({share:.0%}). Spend what is left on the calls that matter most."


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """Steps of the run wait for a person's approval (`ApprovalRequest`): asked now, or the run returns waiting."""

    kind: Literal["approval_requested"] = "approval_requested"
    run_id: str
    request: ApprovalRequest
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanFinished:
    """A plan ended; ``result`` holds every step's record."""

    kind: Literal["plan_finished"] = "plan_finished"
    run_id: str
    result: PlanResult


PlanEvent: TypeAlias = (
    PlanStarted
    | StepStarted
    | StepRetrying
    | StepFinished
    | ToolChosen
    | CacheHit
    | BudgetWarning
    | ApprovalRequested
    | PlanFinished
)
EventHandler: TypeAlias = Callable[[PlanEvent], None]
