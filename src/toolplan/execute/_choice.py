"""The seam between a run and whatever chooses among alternative tools (`toolplan.policy` implements it).

A step whose tool is a group (a registry group, or ``"tool": {"one_of": [...]}``) asks the run's
`ToolChooser` which member to call when it is dispatched, and tells it how the call went. `execute/`
owns this protocol and never imports the policy layer; without a chooser a run calls the group's
general member (else its first): `FixedChooser`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ("Choice", "ChoiceOutcome", "ChoiceRequest", "FixedChooser", "ToolChooser")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChoiceRequest:
    """What a chooser is asked when a step with alternatives is dispatched.

    Attributes:
        group: The group's name (a registry group, or the sorted ``one_of`` joined by ``|``).
        candidates: The members the budget still allows, in the group's order (all of them when it
            allows none: the call will then be refused, on record).
        general: The member marked ``general``, if any.
        strategy: The strategy the plan asks for (its ``policy``), or None.
        budget_left: The share of the tightest limit still left (calls, cost, time; 0 to 1), or None
            when the run has no such limit.
        run_id: The run.
        step_id: The step.
    """

    group: str
    candidates: tuple[str, ...]
    general: str | None = None
    strategy: str | None = None
    budget_left: float | None = None
    run_id: str = ""
    step_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """One choice among alternatives: recorded in the run's events and its `PlanResult.choices`.

    Attributes:
        group: The group chosen from.
        chosen: The member called.
        strategy: How it was chosen (``greedy``, ``epsilon_greedy``, ``ucb1``, ``thompson``, ``general``,
            ``fixed``).
        probability: The probability the strategy gave the chosen member (for offline evaluation).
        candidates: The members it chose from.
        step_id: The step it was made for.
        reason: Why, in a sentence, when it was not the strategy's own pick (a tight budget).
        general: The group's member marked ``general``, if any (for the audit).
    """

    group: str
    chosen: str
    strategy: str
    probability: float
    candidates: tuple[str, ...] = ()
    step_id: str = ""
    reason: str = ""
    general: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"group", "chosen", "strategy", "probability", "candidates", "step"[, "reason"]}``."""
        out: dict[str, Any] = {
            "group": self.group,
            "chosen": self.chosen,
            "strategy": self.strategy,
            "probability": self.probability,
            "candidates": list(self.candidates),
            "step": self.step_id,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.general is not None:
            out["general"] = self.general
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Choice:
        """A choice from `to_dict`'s form (a stored ``tool_chosen`` event)."""
        return cls(
            group=str(data.get("group", "")),
            chosen=str(data.get("chosen", "")),
            strategy=str(data.get("strategy", "")),
            probability=float(data.get("probability", 0.0)),
            candidates=tuple(str(c) for c in data.get("candidates", ())),
            step_id=str(data.get("step", "")),
            reason=str(data.get("reason", "")),
            general=data.get("general"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChoiceOutcome:
    """How the chosen member's call went, for the chooser to learn from.

    Attributes:
        ok: The step succeeded with the chosen tool (retries included, a fallback not).
        latency: Seconds its calls took.
        cost: Budget units they cost.
        error_kind: The step's error kind when it failed.
        latency_scale: The run's deadline in seconds, if it has one (rewards are relative to it).
        cost_scale: The run's ``max_cost``, if it has one.
    """

    ok: bool
    latency: float
    cost: float
    error_kind: str | None = None
    latency_scale: float | None = None
    cost_scale: float | None = None


@runtime_checkable
class ToolChooser(Protocol):
    """Chooses which member of a group a step calls, and learns from how it went."""

    async def choose(self, request: ChoiceRequest) -> Choice:
        """The member to call."""
        ...

    async def observe(self, choice: Choice, outcome: ChoiceOutcome) -> None:
        """How the call of ``choice.chosen`` went (not called for calls the budget refused)."""
        ...


class FixedChooser:
    """No learning: the group's general member, else its first (what a run without a policy does)."""

    async def choose(self, request: ChoiceRequest) -> Choice:
        """The general candidate, else the first."""
        chosen = request.general if request.general in request.candidates else request.candidates[0]
        return Choice(
            group=request.group,
            chosen=chosen or request.candidates[0],
            strategy="fixed",
            probability=1.0,
            candidates=request.candidates,
            step_id=request.step_id,
            general=request.general,
        )

    async def observe(self, choice: Choice, outcome: ChoiceOutcome) -> None:
        """Nothing is learnt."""


FIXED_CHOOSER = FixedChooser()
