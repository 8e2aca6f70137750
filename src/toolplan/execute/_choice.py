"""The seam between a run and whatever chooses among alternative tools (`toolplan.policy` implements it).

A step whose tool is a group (a registry group, or ``"tool": {"one_of": [...]}``) asks the run's
`ToolChooser` which member to call when it is dispatched, and tells it how the call went. `execute/`
owns this protocol and never imports the policy layer; without a chooser a run calls the group's
general member (else its first): `FixedChooser`, unless its plan names a strategy: then the
registry's own learning policy chooses (`default_chooser`), which `toolplan.policy` provides
(`set_default_policy`) when it is imported, as ``import toolplan`` does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._errors import PlanIssue

if TYPE_CHECKING:
    from ..plan import CompiledPlan
    from ..tools import ToolRegistry

log = logging.getLogger("toolplan.policy")

__all__ = (
    "Choice",
    "ChoiceOutcome",
    "ChoiceRequest",
    "FixedChooser",
    "ToolChooser",
    "default_chooser",
    "forgetful",
    "learns",
    "set_default_policy",
    "warn_forgetful",
)


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


# What `toolplan.policy` registers: how to make a learning policy, and which plan texts name a strategy.
_make_policy: Callable[[], ToolChooser] | None = None
_names_strategy: Callable[[str], bool] | None = None


def set_default_policy(make: Callable[[], ToolChooser], names_strategy: Callable[[str], bool]) -> None:
    """Register the learning policy a registry keeps for runs given none (`toolplan.policy` does, on import)."""
    global _make_policy, _names_strategy
    _make_policy, _names_strategy = make, names_strategy


def learns(strategy: str | None) -> bool:
    """A plan's ``policy`` text names a strategy that a run given no chooser learns with."""
    return strategy is not None and _names_strategy is not None and _names_strategy(strategy)


def default_chooser(registry: ToolRegistry, strategy: str | None) -> ToolChooser:
    """The chooser of a run given none.

    ``registry.default_policy`` (made on first use) when the plan names a strategy, else
    `FixedChooser` (the general member, else the first).
    """
    if not learns(strategy) or _make_policy is None:
        return FIXED_CHOOSER
    chooser: ToolChooser | None = registry.default_policy
    if chooser is None:
        chooser = registry.default_policy = _make_policy()
    return chooser


def forgetful(compiled: CompiledPlan, registry: ToolRegistry) -> PlanIssue | None:
    """A warning when ``compiled`` names a strategy and its run, given no policy, keeps nothing it learns.

    For a run given no policy on a registry that goes when the run ends (one made for the run from a
    list or dict of tools, or one of a process that runs one plan, such as ``toolplan run``): the
    registry's policy, and what it learned, go with it. None when the plan names no strategy or
    none of its steps chooses among alternatives.
    """
    strategy = compiled.plan.policy
    if not learns(strategy):
        return None
    chooses = [
        cs.step.id
        for cs in compiled.steps.values()
        if cs.step.one_of
        or registry.group(cs.step.tool) is not None
        or (cs.step.fallback is not None and registry.group(cs.step.fallback.tool) is not None)
    ]
    if not chooses:
        return None
    message = (
        f"The plan names the strategy {strategy!r}, but the run was given no policy and its tools are not a "
        "ToolRegistry kept between runs: what it learns about the alternatives is forgotten when the run ends, "
        "so the next run chooses as if nothing had been tried. Pass the same ToolRegistry to every run (it keeps "
        "a learning policy, ToolRegistry.default_policy), or policy=ToolPolicy(...) (with store= to keep what "
        "it learns across processes)."
    )
    return PlanIssue(code="policy_not_kept", message=message, step=chooses[0], severity="warning")


def warn_forgetful(compiled: CompiledPlan, registry: ToolRegistry) -> CompiledPlan:
    """``compiled`` with `forgetful`'s warning among its warnings (and logged), if there is one."""
    issue = forgetful(compiled, registry)
    if issue is None:
        return compiled
    log.warning("toolplan: %s", issue.message)
    return dataclasses.replace(compiled, warnings=(*compiled.warnings, issue))
