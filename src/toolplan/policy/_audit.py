"""`audit`: what a plan declared against what ran. Findings are reported, never used to change a run.

Four kinds (the first three as the ACP proposal names them), each finding with a code, the step it
concerns, a sentence and the ``plan_id`` of the declaration it was judged against:

- ``BudgetExceeded``: a declared limit (``max_tool_calls``, per tool, ``max_cost``, ``max_latency``)
  and how far the run went past it.
- ``PlanDeviation``: an intended call that never ran (``missing_call``, ``not_executed``), a call
  nobody declared (``undeclared_call``), another tool where one was declared (``different_tool``),
  a call that started before a call it was declared to depend on had ended (``reordered``).
- ``BLPViolation``: a specialised tool (the trick) where the declared policy preferred the general
  one (``specialised_tool``); ``details`` name the ``trick`` and the ``generalAlternative``.
- ``PolicyViolation``: a choice outside its group's safety class (``outside_safety_class``), a
  choice by another strategy than the declared one (``strategy_mismatch``).

Declared calls are matched to traced calls in order, by tool or by group (a declared ``search``
matches the member chosen for it); a declared fallback matches the call it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..execute import Choice
from ..tools import ToolRegistry, ToolsLike
from ._declared import Declaration, DeclaredCall
from ._trace import Trace, TracedCall

__all__ = ("Finding", "FindingKind", "audit")

FindingKind = Literal["BudgetExceeded", "PlanDeviation", "BLPViolation", "PolicyViolation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing the audit found.

    Attributes:
        kind: ``BudgetExceeded``, ``PlanDeviation``, ``BLPViolation`` or ``PolicyViolation``.
        code: What exactly (``max_tool_calls``, ``missing_call``, ``specialised_tool``...).
        step: The step (or declared call) it concerns, if one.
        message: A sentence saying what happened and what was declared.
        details: The numbers and names behind the sentence.
        plan_id: The ``planId`` of the declaration the call was judged against, if it has one.
    """

    kind: FindingKind
    code: str
    step: str | None
    message: str
    details: Mapping[str, Any] = field(default_factory=dict[str, Any])
    plan_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "code", "step", "message", "details", "plan_id"}``."""
        return {
            "kind": self.kind,
            "code": self.code,
            "step": self.step,
            "message": self.message,
            "details": dict(self.details),
            "plan_id": self.plan_id,
        }


def audit(declaration: Declaration, trace: Trace, *, tools: ToolsLike | None = None) -> list[Finding]:
    """Compare ``declaration`` with ``trace``; returns the findings (none: the run kept to its plan).

    Args:
        declaration: What was declared (`parse_declaration`, `declaration_of`).
        trace: What ran (`trace_of`).
        tools: The run's tools, if at hand: their ``cost`` annotations price the calls for
            ``max_cost``, their groups and ``general`` marks show specialised calls made outside a
            choice, and their safety classes check the choices.
    """
    registry = ToolRegistry.of(tools) if tools is not None else None
    findings = _budget(declaration, trace, registry)
    findings.extend(_deviations(declaration, trace))
    findings.extend(_policy(declaration, trace, registry))
    if declaration.plan_id is not None:
        findings = [replace(f, plan_id=declaration.plan_id) for f in findings]
    return findings


# -- budget --------------------------------------------------------------------------------------


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _exceeded(code: str, step: str | None, message: str, limit: float, used: float, **details: Any) -> Finding:
    """A BudgetExceeded finding; its details end with the declared ``limit``, what was ``used`` and how far ``over``."""
    details.update(limit=limit, used=used, over=used - limit)
    return Finding(kind="BudgetExceeded", code=code, step=step, message=message, details=details)


def _budget(declaration: Declaration, trace: Trace, registry: ToolRegistry | None) -> list[Finding]:
    budget = declaration.budget
    if budget is None:
        return []
    out: list[Finding] = []
    # One entry per call made, in the order the steps started (a step's retries follow it).
    calls: list[TracedCall] = [c for c in trace.ran for _ in range(max(c.attempts, 1))]
    limit = budget.max_tool_calls
    if limit is not None and len(calls) > limit:
        crossing = calls[limit]
        message = (
            f"The plan declared max_tool_calls={limit}, but {len(calls)} calls were made "
            f"({len(calls) - limit} over); the {_ordinal(limit + 1)} was step {crossing.step_id!r} "
            f"({crossing.tool!r})."
        )
        out.append(_exceeded("max_tool_calls", crossing.step_id, message, limit, len(calls)))
    for tool, cap in budget.max_tool_calls_per_tool.items():
        made = [c for c in calls if tool in c.names]
        if len(made) > cap:
            message = (
                f"The plan declared at most {cap} calls of {tool!r}, but {len(made)} were made "
                f"({len(made) - cap} over)."
            )
            out.append(_exceeded("max_tool_calls_per_tool", made[cap].step_id, message, cap, len(made), tool=tool))
    if budget.max_cost is not None and registry is not None:
        spent, crossing_step = 0.0, None
        for c in calls:
            spent += registry.definition(c.tool).annotations.cost if c.tool in registry else 0.0
            if crossing_step is None and spent > budget.max_cost + 1e-12:
                crossing_step = c.step_id
        if crossing_step is not None:
            message = (
                f"The plan declared max_cost={budget.max_cost:g}, but its calls cost {spent:g} "
                f"({spent - budget.max_cost:g} over); step {crossing_step!r} went past it."
            )
            out.append(_exceeded("max_cost", crossing_step, message, budget.max_cost, spent))
    duration = trace.duration
    if budget.max_latency is not None and duration is not None and duration > budget.max_latency:
        late = next(
            (
                c
                for c in trace.ran
                if c.ended_at is not None
                and trace.started_at is not None
                and c.ended_at - trace.started_at > budget.max_latency
            ),
            None,
        )
        message = (
            f"The plan declared max_latency={budget.max_latency:g}s, but the run took {duration:.3g}s "
            f"({duration - budget.max_latency:.3g}s over)."
        )
        step = late.step_id if late is not None else None
        out.append(_exceeded("max_latency", step, message, budget.max_latency, duration))
    return out


# -- deviations ----------------------------------------------------------------------------------


def _match(declaration: Declaration, trace: Trace) -> tuple[dict[str, TracedCall], dict[int, str]]:
    """Declared call id -> the traced call it became; traced call index -> declared call id (or fallback mark)."""
    calls = list(trace.calls)
    matched: dict[str, TracedCall] = {}
    taken: dict[int, str] = {}
    single_run = len({c.run_id for c in calls}) <= 1
    if declaration.source == "native" and single_run:  # the same plan: its steps are its calls
        by_step = {c.step_id: i for i, c in enumerate(calls)}
        for d in declaration.calls:
            i = by_step.get(d.id)
            if i is not None:
                matched[d.id], taken[i] = calls[i], d.id
    for d in declaration.calls:
        if d.id in matched:
            continue
        for i, c in enumerate(calls):
            if i not in taken and d.tool in c.names:
                matched[d.id], taken[i] = c, d.id
                break
    # A declared fallback accounts for a call of its tool after the declared call failed.
    # A declared fallback chain accounts for calls of its tools, in its order.
    for d in declaration.calls:
        call = matched.get(d.id)
        chain = d.fallbacks or ((d.fallback,) if d.fallback is not None else ())
        if not chain or call is None or (call.status == "succeeded" and not call.used_fallback):
            continue
        for link, tool in enumerate(chain, 1):
            for i, c in enumerate(calls):
                if i not in taken and tool in c.names:
                    taken[i] = f"{d.id}:fallback" if link == 1 else f"{d.id}:fallback{link}"
                    break
    return matched, taken


def _intent(d: DeclaredCall) -> dict[str, Any]:
    """A declared call as the ACP proposal's ToolCallIntent (a PlanDeviation's ``expected``)."""
    out: dict[str, Any] = {"toolName": d.tool}
    if d.rationale is not None:
        out["rationale"] = d.rationale
    if d.expected_outcome is not None:
        out["expectedOutcome"] = d.expected_outcome
    return out


def _actual(c: TracedCall) -> dict[str, Any]:
    """A traced call as a PlanDeviation's ``actual``."""
    return {"tool": c.tool, "step": c.step_id, "status": c.status}


def _deviation(
    code: str, step: str, message: str, intent: DeclaredCall | None, call: TracedCall | None, **details: Any
) -> Finding:
    """A PlanDeviation between a declared call and what ran; ``expected`` and ``actual`` end its details."""
    details.update(expected=None if intent is None else _intent(intent), actual=None if call is None else _actual(call))
    return Finding(kind="PlanDeviation", code=code, step=step, message=message, details=details)


def _deviations(declaration: Declaration, trace: Trace) -> list[Finding]:
    out: list[Finding] = []
    matched, taken = _match(declaration, trace)
    ran = [c for c in trace.calls if c.ran]
    extra = [c for i, c in enumerate(trace.calls) if i not in taken and c.ran]
    position = {id(c): n for n, c in enumerate(ran)}
    for n, d in enumerate(declaration.calls):
        call = matched.get(d.id)
        if call is not None and not call.ran:
            why = f": {call.error}" if call.error else ""
            message = f"Declared call {d.id} ({d.tool!r}) never called a tool: it ended {call.status}{why}"
            out.append(_deviation("not_executed", d.id, message, d, call, declared_tool=d.tool, status=call.status))
        elif call is None:
            # Another tool in the slot this call was declared for: a different tool, not missing plus extra.
            other = next((c for c in extra if position[id(c)] == n), None)
            if other is not None:
                extra.remove(other)
                message = (
                    f"Declared call {d.id} was to {d.tool!r}, but {other.tool!r} ran in its place "
                    f"(step {other.step_id!r})."
                )
                details = {"declared_tool": d.tool, "actual_tool": other.tool, "declared": d.id}
                out.append(_deviation("different_tool", other.step_id, message, d, other, **details))
            else:
                why = f": {d.rationale}" if d.rationale else ""
                message = f"Declared call {d.id} ({d.tool!r}{why}) was never made."
                out.append(_deviation("missing_call", d.id, message, d, None, declared_tool=d.tool))
    for c in extra:
        message = f"Step {c.step_id!r} called {c.tool!r}, which the plan did not declare."
        out.append(_deviation("undeclared_call", c.step_id, message, None, c, actual_tool=c.tool, run_id=c.run_id))
    out.extend(_reordered(declaration, matched))
    return out


def _reordered(declaration: Declaration, matched: dict[str, TracedCall]) -> list[Finding]:
    out: list[Finding] = []
    by_id: dict[str, DeclaredCall] = {d.id: d for d in declaration.calls}
    for d in declaration.calls:
        call = matched.get(d.id)
        if call is None or call.started_at is None:
            continue
        for dep in d.depends_on:
            before = matched.get(dep)
            if before is None or before.ended_at is None or before.ended_at <= call.started_at:
                continue
            out.append(
                Finding(
                    kind="PlanDeviation",
                    code="reordered",
                    step=call.step_id,
                    message=f"Declared call {d.id} ({d.tool!r}) depends on call {dep} ({by_id[dep].tool!r}), but it "
                    f"started {before.ended_at - call.started_at:.3g}s before that one ended.",
                    details={"declared": d.id, "depends_on": dep},
                )
            )
    return out


# -- policy --------------------------------------------------------------------------------------


def _of_choice(kind: FindingKind, code: str, choice: Choice, message: str, **details: Any) -> Finding:
    """A finding about a choice among alternatives: at its step, its record (then ``details``) as details."""
    return Finding(kind=kind, code=code, step=choice.step_id, message=message, details={**choice.to_dict(), **details})


def _policy(declaration: Declaration, trace: Trace, registry: ToolRegistry | None) -> list[Finding]:
    out: list[Finding] = []
    policy = declaration.policy
    prefer = policy.prefer_general_methods if policy is not None else None
    for choice in trace.choices:
        if choice.chosen not in choice.candidates:
            message = (
                f"Step {choice.step_id!r} ran {choice.chosen!r}, which is not one of group "
                f"{choice.group!r}'s alternatives ({', '.join(choice.candidates)})."
            )
            out.append(_of_choice("PolicyViolation", "outside_safety_class", choice, message))
        elif registry is not None and all(t in registry for t in (choice.chosen, *choice.candidates)):
            classes = {t: registry.definition(t).annotations.safety_class for t in choice.candidates}
            chosen_class = registry.definition(choice.chosen).annotations.safety_class
            others = {c for t, c in classes.items() if t != choice.chosen}
            if chosen_class == "destructive" or (others and others != {chosen_class}):
                message = (
                    f"Step {choice.step_id!r} explored {choice.chosen!r} ({chosen_class}) in group "
                    f"{choice.group!r}, whose alternatives are "
                    + ", ".join(f"{t} ({c})" for t, c in classes.items())
                    + ": exploration must stay within one safety class and never pick a destructive tool."
                )
                out.append(_of_choice("PolicyViolation", "outside_safety_class", choice, message))
        if prefer == "always" and choice.general is not None and choice.chosen != choice.general:
            message = (
                f"The declared policy prefers general methods, but step {choice.step_id!r} ran the "
                f"specialised {choice.chosen!r} instead of group {choice.group!r}'s general {choice.general!r}."
            )
            details = {"trick": choice.chosen, "generalAlternative": choice.general}
            out.append(_of_choice("BLPViolation", "specialised_tool", choice, message, **details))
        wanted = policy.strategy if policy is not None else None
        if wanted is not None and choice.strategy not in (wanted, "prefer_general_methods"):
            message = (
                f"The declared policy chooses by {wanted}, but step {choice.step_id!r}'s choice in group "
                f"{choice.group!r} was made by {choice.strategy}."
            )
            out.append(_of_choice("PolicyViolation", "strategy_mismatch", choice, message))
    if prefer == "always" and registry is not None:
        chosen_steps = {(c.step_id, c.chosen) for c in trace.choices}
        for call in trace.ran:
            if (call.step_id, call.tool) in chosen_steps:
                continue  # judged with its choice
            for group in registry.groups:
                if call.tool in group.members and group.general is not None and call.tool != group.general:
                    out.append(
                        Finding(
                            kind="BLPViolation",
                            code="specialised_tool",
                            step=call.step_id,
                            message=f"The declared policy prefers general methods, but step {call.step_id!r} called "
                            f"the specialised {call.tool!r} directly; {group.general!r} is the general tool of "
                            f"its group {group.name!r}.",
                            details={
                                "tool": call.tool,
                                "group": group.name,
                                "general": group.general,
                                "trick": call.tool,
                                "generalAlternative": group.general,
                            },
                        )
                    )
                    break
    return out
