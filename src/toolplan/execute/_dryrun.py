"""A dry run: what a plan would do, computed from the plan, the tools' annotations and stored statistics.

`dry_run` validates and compiles the plan like a run, then reports its graph (waves, critical path),
each step's tool, annotations and arguments, the worst case of its budget (every retry and fallback
taken) against the run's limits, and the expected duration where a store holds the tools' latencies.
It calls no tool, writes no run and asks no policy to choose: a group's members are all listed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._errors import PlanIssue
from .._json import json_safe
from ..plan import Budget, CompiledPlan, CompiledStep
from ..plan._internal import is_literal
from ..tools import ToolAnnotations, ToolDefinition, ToolRegistry
from ._limits import RunLimits

__all__ = ("DryRunBudget", "DryRunReport", "DryRunStep", "LatencyStats", "ToolLatency", "dry_run_report")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolLatency:
    """How long calls of one tool took, from stored runs.

    Attributes:
        calls: How many calls the mean is over (decayed counts may be fractional).
        mean: Mean seconds per call.
    """

    calls: float
    mean: float


@runtime_checkable
class LatencyStats(Protocol):
    """A store that knows how long tools took (`toolplan.store.Store` does): what a dry run's duration needs."""

    async def tool_latencies(self, tools: Sequence[str]) -> Mapping[str, ToolLatency]:
        """The latency of each of ``tools`` that has any stored (the others are left out)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DryRunStep:
    """One step as a dry run sees it.

    Attributes:
        id: The step's id.
        tool: The tool it names (a group's name for alternatives).
        alternatives: The members it would choose among (empty for a plain tool): which one runs is
            decided when the step is dispatched, so the budget counts the dearest.
        wave: Its Kahn level (0: it can start at once).
        depends_on: The steps it waits for (references, ``depends_on`` and ``after``).
        arguments: Its arguments as the plan wrote them: final when ``literal``, else with their
            references (``"$ref:..."``, ``{{...}}``) still to be filled in.
        literal: The arguments hold no reference: they are exactly what the tool would get.
        annotations: ``read_only``, ``idempotent``, ``destructive``, ``general`` and ``resource``, as set.
        cost: Budget units of one call (the dearest member's for alternatives).
        calls: The most calls it may make: the first, every retry, and its fallback.
        expected_seconds: Its tool's mean latency in stored runs (for alternatives, the slowest of
            the members that have run), or None when unknown.
        needs_approval: Whether the run's approval rule asks a person before it runs (None: no rule given).
        fallback: The tool of its fallback, if any.
        rationale: Why the plan calls it, if the plan says.
    """

    id: str
    tool: str
    alternatives: tuple[str, ...] = ()
    wave: int = 0
    depends_on: tuple[str, ...] = ()
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    literal: bool = True
    annotations: tuple[str, ...] = ()
    cost: float = 0.0
    calls: int = 1
    expected_seconds: float | None = None
    needs_approval: bool | None = None
    fallback: str | None = None
    rationale: str | None = None

    @property
    def destructive(self) -> bool:
        """The step's tool (or one of its alternatives, or its fallback) may destroy data."""
        return "destructive" in self.annotations

    def to_dict(self) -> dict[str, Any]:
        """The step as JSON data."""
        return {
            "id": self.id,
            "tool": self.tool,
            "alternatives": list(self.alternatives),
            "wave": self.wave,
            "depends_on": list(self.depends_on),
            "arguments": json_safe(self.arguments),
            "literal": self.literal,
            "annotations": list(self.annotations),
            "cost": self.cost,
            "calls": self.calls,
            "expected_seconds": self.expected_seconds,
            "needs_approval": self.needs_approval,
            "fallback": self.fallback,
            "rationale": self.rationale,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DryRunBudget:
    """The worst case of a plan's budget, and the run's limits it is held against.

    Attributes:
        calls: The most tool calls the plan may make (every retry and fallback taken).
        calls_per_tool: The same by tool (a group's calls under the group's name).
        cost: The most budget units those calls may cost, from the tools' ``cost`` annotations.
        limits: The run's budget (the caller's and the plan's merged: the tighter wins).
        over: One sentence for each limit the worst case passes (empty: it fits), and one when the
            expected duration passes the run's deadline. Steps past a limit would end ``not_run``
            when the run gets that far.
    """

    calls: int
    calls_per_tool: Mapping[str, int]
    cost: float
    limits: Budget
    over: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """The worst case stays within every limit."""
        return not self.over

    def to_dict(self) -> dict[str, Any]:
        """The budget as JSON data."""
        limits = self.limits
        return {
            "calls": self.calls,
            "calls_per_tool": dict(self.calls_per_tool),
            "cost": self.cost,
            "limits": {
                "max_tool_calls": limits.max_tool_calls,
                "max_tool_calls_per_tool": dict(limits.max_tool_calls_per_tool),
                "max_cost": limits.max_cost,
                "max_latency": limits.max_latency,
            },
            "fits": self.fits,
            "over": list(self.over),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DryRunReport:
    """What a plan would do, without doing it (``execute_plan(..., dry_run=True)``).

    Attributes:
        steps: Each step, in plan order.
        output_steps: The steps whose outputs the run would return.
        waves: Kahn levels of the graph: the steps of a wave can run at once.
        critical_path: The longest chain of dependent steps (weighted by expected latencies when all
            are known, else by step count).
        destructive: The steps whose tool may destroy data (``destructive``).
        needs_approval: The steps the run's approval rule would hold for a person; None when no
            rule was given.
        budget: The worst case of calls and cost against the run's limits.
        expected_seconds: The expected duration: the critical path weighted by stored mean latencies,
            or None when some step's latency is unknown (see ``duration_note``).
        duration_note: How ``expected_seconds`` was found, or why it is unknown.
        max_concurrency: Steps the run would run at once.
        failure_mode: ``fail_forward`` or ``fail_fast``.
        warnings: The plan's validation warnings.
    """

    steps: Mapping[str, DryRunStep]
    output_steps: tuple[str, ...]
    waves: tuple[tuple[str, ...], ...]
    critical_path: tuple[str, ...]
    destructive: tuple[str, ...]
    needs_approval: tuple[str, ...] | None
    budget: DryRunBudget
    expected_seconds: float | None
    duration_note: str
    max_concurrency: int
    failure_mode: str
    warnings: tuple[PlanIssue, ...] = ()

    @property
    def read_only(self) -> bool:
        """Every step's tool only reads (a run would change nothing)."""
        return all("read_only" in s.annotations for s in self.steps.values())

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data (``toolplan run --dry-run --json`` prints it)."""
        return {
            "dry_run": True,
            "steps": [s.to_dict() for s in self.steps.values()],
            "output_steps": list(self.output_steps),
            "waves": [list(w) for w in self.waves],
            "critical_path": list(self.critical_path),
            "destructive": list(self.destructive),
            "needs_approval": None if self.needs_approval is None else list(self.needs_approval),
            "budget": self.budget.to_dict(),
            "expected_seconds": self.expected_seconds,
            "duration_note": self.duration_note,
            "max_concurrency": self.max_concurrency,
            "failure_mode": self.failure_mode,
            "read_only": self.read_only,
            "warnings": [w.to_dict() for w in self.warnings],
        }


_FLAGS = ("read_only", "idempotent", "destructive", "general")


def _flags(annotations: Sequence[ToolAnnotations]) -> tuple[str, ...]:
    """The annotations of a step's tools: a flag holds when it holds for all (``destructive``: for any)."""
    out = []
    for flag in _FLAGS:
        values = [getattr(a, flag) for a in annotations]
        if any(values) if flag == "destructive" else all(values):
            out.append(flag)
    resources = sorted({a.resource for a in annotations if a.resource is not None})
    out.extend(f"resource={r}" for r in resources)
    return tuple(out)


def _definitions(registry: ToolRegistry, names: Sequence[str]) -> list[ToolDefinition]:
    return [d for d in (registry.get(n) for n in names) if d is not None]


async def dry_run_report(
    compiled: CompiledPlan,
    registry: ToolRegistry,
    limits: RunLimits,
    *,
    store: object = None,
    approval: Any = None,
) -> DryRunReport:
    """The report of a compiled plan (see `DryRunReport`); nothing is called or written."""
    plan = compiled.plan
    limits = limits.merged(plan)
    order = compiled.order
    waves = compiled.waves()
    level = {sid: k for k, wave in enumerate(waves) for sid in wave}
    rows: dict[str, dict[str, Any]] = {}
    tools_named: list[str] = []
    for sid, cs in compiled.steps.items():
        rows[sid] = _step_row(cs, registry, approval)
        tools_named.extend(rows[sid]["members"])
    latencies, note = await _latencies(store, tools_named)
    steps: dict[str, DryRunStep] = {}
    for sid, row in rows.items():
        known = [latencies[m].mean for m in row.pop("members") if m in latencies]
        expected = max(known) if known else None  # alternatives: the slowest member that has run
        steps[sid] = DryRunStep(
            **row, wave=level.get(sid, 0), depends_on=tuple(order.get(sid, ())), expected_seconds=expected
        )
    unknown = sorted({s.tool for s in steps.values() if s.expected_seconds is None})
    expected_seconds: float | None = None
    if latencies and not unknown:
        path, total = compiled.critical_path({sid: s.expected_seconds or 0.0 for sid, s in steps.items()})
        expected_seconds = total
        note = "the critical path, by the mean latency of each step's tool in stored runs (retries not counted)"
    else:
        path, _steps = compiled.critical_path()
        if latencies:
            note = f"unknown: the store has no latency of {', '.join(unknown)}"
    budget = _budget(steps, registry, limits.budget)
    deadline = limits.run_deadline
    if expected_seconds is not None and deadline is not None and expected_seconds > deadline:
        late = f"an expected duration of {expected_seconds:.3g}s, over the deadline of {deadline:g}s"
        budget = dataclasses.replace(budget, over=(*budget.over, late))
    return DryRunReport(
        steps=steps,
        output_steps=plan.outputs,
        waves=tuple(tuple(w) for w in waves),
        critical_path=tuple(path),
        destructive=tuple(sid for sid, s in steps.items() if s.destructive),
        needs_approval=None if approval is None else tuple(sid for sid, s in steps.items() if s.needs_approval),
        budget=budget,
        expected_seconds=expected_seconds,
        duration_note=note,
        max_concurrency=limits.max_concurrency,
        failure_mode=limits.failure_mode,
        warnings=compiled.warnings,
    )


def _step_row(cs: CompiledStep, registry: ToolRegistry, approval: Any) -> dict[str, Any]:
    """A step's fields but its place in the graph and its latency (``members``: the tools it may call)."""
    step = cs.step
    group = registry.group(step.tool)
    alternatives = step.one_of or (group.members if group is not None else ())
    members = alternatives or (step.tool,)
    definitions = _definitions(registry, members)
    annotations = [d.annotations for d in definitions]
    fallback = step.fallback
    fb_annotations = (
        [d.annotations for d in _definitions(registry, _members(registry, fallback.tool))] if fallback else []
    )
    retries = step.retry if step.retry is not None else max((a.retries for a in annotations), default=0)
    calls = 1 + retries + (1 if fallback is not None else 0)
    cost = float(max((a.cost for a in annotations), default=0.0))
    needs: bool | None = None
    if approval is not None:  # before anything ran: the rule reads the arguments as written
        needs = bool(approval.needs_approval(step, registry))
    return {
        "id": step.id,
        "tool": step.tool,
        "alternatives": tuple(alternatives),
        "members": members,
        "arguments": step.arguments,
        "literal": is_literal(cs.arguments),
        "annotations": _flags(annotations) + tuple(f for f in _flags(fb_annotations) if f == "destructive"),
        "cost": cost,
        "calls": calls,
        "needs_approval": needs,
        "fallback": fallback.tool if fallback is not None else None,
        "rationale": step.rationale,
    }


def _members(registry: ToolRegistry, tool: str) -> tuple[str, ...]:
    group = registry.group(tool)
    return group.members if group is not None else (tool,)


async def _latencies(store: object, tools: Sequence[str]) -> tuple[Mapping[str, ToolLatency], str]:
    """The stored latencies of ``tools``, and a note when there are none to be had."""
    if store is None:
        return {}, "unknown: no store was given to read the tools' latencies from"
    if not isinstance(store, LatencyStats):
        return {}, f"unknown: the store ({type(store).__name__}) keeps no latencies of tools"
    found = await store.tool_latencies(sorted(set(tools)))
    if not found:
        return {}, "unknown: the store has no latency of any of the plan's tools yet"
    return found, ""


def _budget(steps: Mapping[str, DryRunStep], registry: ToolRegistry, limits: Budget) -> DryRunBudget:
    calls = 0
    cost = 0.0
    per_tool: dict[str, int] = {}
    members: dict[str, tuple[str, ...]] = {}  # a group's (or one_of's) name: the tools it may call
    for s in steps.values():
        main = s.calls - (1 if s.fallback is not None else 0)
        calls += s.calls
        cost += main * s.cost
        per_tool[s.tool] = per_tool.get(s.tool, 0) + main
        if s.alternatives:
            members[s.tool] = s.alternatives
        if s.fallback is not None:
            per_tool[s.fallback] = per_tool.get(s.fallback, 0) + 1
            fb = _members(registry, s.fallback)
            if len(fb) > 1:
                members[s.fallback] = fb
            cost += max((d.annotations.cost for d in _definitions(registry, fb)), default=0.0)
    over: list[str] = []
    if limits.max_tool_calls is not None and calls > limits.max_tool_calls:
        over.append(f"up to {calls} calls, over max_tool_calls={limits.max_tool_calls}")
    if limits.max_cost is not None and cost > limits.max_cost:
        over.append(f"a cost of up to {cost:g}, over max_cost={limits.max_cost:g}")
    for tool, cap in limits.max_tool_calls_per_tool.items():
        # a member of a group may be the one chosen for every call of the group
        n = per_tool.get(tool, 0) + sum(per_tool[g] for g, ms in members.items() if tool in ms)
        if n > cap:
            over.append(f"up to {n} calls of {tool!r}, over its max_tool_calls_per_tool={cap}")
    return DryRunBudget(calls=calls, calls_per_tool=per_tool, cost=cost, limits=limits, over=tuple(over))
