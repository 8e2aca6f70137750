"""Validation: every problem of a plan at once, before any side effect."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._errors import PlanIssue, PlanValidationError
from .._records import fast_init, maker, positional_maker
from ..tools import ToolRegistry, ToolsLike
from ..tools._internal import alternatives_problem, inline_group_name
from ._graph import critical_path, find_cycles, mermaid, waves
from ._ir import META_TOOL_NAMES, Dialect, Fallback, Plan, Step
from ._parse import _new_plan, _new_step, duplicate_positions, name_by_position, parse_source
from ._refs import ArgumentCompiler, Compiled, literal

__all__ = (
    "DEFAULT_MAX_STEPS",
    "CompiledPlan",
    "CompiledStep",
    "ValidationReport",
    "compile_calls",
    "compile_plan",
    "parse_plan",
    "validate_plan",
)

DEFAULT_MAX_STEPS = 50
_NO_AFTER: Mapping[str, tuple[str, ...]] = MappingProxyType({})  # a batch's ordering edges: none


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledStep:
    """A step with its arguments compiled and its dependencies (references plus depends_on) known.

    ``condition`` is its compiled ``when`` (None: the step has none).
    """

    step: Step
    arguments: Compiled
    fallback_arguments: Compiled | None
    deps: tuple[str, ...]
    condition: Any = None
    #: The compiled arguments of the fallback's own fallbacks (links 2 and on of the chain), if any.
    more_fallback_arguments: tuple[Compiled, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledPlan:
    """A valid plan, ready to execute.

    ``deps``: each step's dependencies (they must succeed); ``after``: for each step that has any,
    the steps it runs after whatever their outcome (its ``after`` less its ``deps``); usually empty.
    """

    plan: Plan
    steps: Mapping[str, CompiledStep]
    warnings: tuple[PlanIssue, ...] = ()
    deps: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    after: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])

    @property
    def order(self) -> Mapping[str, tuple[str, ...]]:
        """What each step waits for: its ``deps`` and its ``after`` steps (just ``deps`` when no step has any)."""
        return ordering(self.deps, self.after)

    def waves(self) -> list[list[str]]:
        """Kahn levels, for display and sequential mode."""
        return waves(self.order)

    def critical_path(self, durations: Mapping[str, float] | None = None) -> tuple[list[str], float]:
        """The heaviest chain of dependencies (unit weights without ``durations``)."""
        return critical_path(self.order, durations)

    def mermaid(self) -> str:
        """Mermaid flowchart text of the DAG with its waves."""
        return mermaid(self.order, {s: f"{s}: {c.step.tool}" for s, c in self.steps.items()})


def ordering(
    deps: Mapping[str, tuple[str, ...]], after: Mapping[str, tuple[str, ...]]
) -> Mapping[str, tuple[str, ...]]:
    """``deps`` with each step's ``after`` steps added: what each step waits for."""
    if not after:
        return deps
    return {sid: (*ds, *after[sid]) if sid in after else ds for sid, ds in deps.items()}


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationReport:
    """What `validate_plan` found: errors (the plan cannot run) and warnings (it can)."""

    plan: Plan | None
    errors: tuple[PlanIssue, ...]
    warnings: tuple[PlanIssue, ...]
    compiled: CompiledPlan | None = None

    @property
    def ok(self) -> bool:
        """True when there is no error."""
        return not self.errors

    def raise_for_errors(self) -> CompiledPlan:
        """The compiled plan, or `PlanValidationError` listing every error."""
        if self.errors or self.compiled is None:
            raise PlanValidationError([*self.errors, *self.warnings])
        return self.compiled

    def to_dict(self) -> dict[str, Any]:
        """``{"status": "valid"|"invalid", "errors": [...], "warnings": [...]}``."""
        return {
            "status": "valid" if self.ok else "invalid",
            "errors": [e.to_dict() for e in self.errors],
            "warnings": [w.to_dict() for w in self.warnings],
        }


# Records made per step or per plan: makers cost less than class calls (see toolplan._records).
_new_compiled = maker(CompiledStep)
_compiled_at = positional_maker(CompiledStep)  # the same, its fields by position (one per step of every plan)
_new_compiled_plan = maker(CompiledPlan)
_new_report = maker(ValidationReport)


def parse_plan(source: Any, *, dialect: Dialect | None = None) -> Plan:
    """Parse a plan (dict, JSON text or `Plan`, in any dialect) into the IR.

    Raises:
        PlanValidationError: the plan is structurally invalid; ``.issues`` lists every problem.
    """
    plan, issues = parse_source(source, dialect=dialect)
    if plan is None or any(i.severity == "error" for i in issues):
        raise PlanValidationError(issues)
    return plan


def validate_plan(
    source: Any,
    tools: ToolsLike | None = None,
    *,
    dialect: Dialect | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> ValidationReport:
    """Check a plan against the tools without running anything, and report every problem at once."""
    plan, parse_issues = parse_source(source, dialect=dialect)
    issues = list(parse_issues)
    if plan is None:
        return _report(None, issues, None)
    registry = ToolRegistry.of(tools) if tools is not None else None
    compiled = _check(plan, registry, max_steps, issues)
    return _report(plan, issues, compiled)


def compile_plan(
    source: Any,
    tools: ToolsLike | None = None,
    *,
    dialect: Dialect | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> CompiledPlan:
    """Validate and compile, raising `PlanValidationError` with every problem if the plan is invalid."""
    return validate_plan(source, tools, dialect=dialect, max_steps=max_steps).raise_for_errors()


def _report(plan: Plan | None, issues: list[PlanIssue], compiled: CompiledPlan | None) -> ValidationReport:
    if not issues:  # the common case: no generator to run
        return _new_report(plan=plan, errors=(), warnings=(), compiled=compiled)
    errors = tuple(i for i in issues if i.severity == "error")
    return _new_report(
        plan=plan,
        errors=errors,
        warnings=tuple(i for i in issues if i.severity == "warning"),
        compiled=None if errors else compiled,
    )


def step_dependencies(step: Step, refs: tuple[str, ...]) -> tuple[str, ...]:
    """A step's dependencies: its ``depends_on`` then the steps its arguments refer to, each once."""
    if not step.depends_on:
        return refs  # already distinct, in order of appearance
    return tuple(dict.fromkeys([*step.depends_on, *refs]))


def _check_rare(
    s: Step,
    sid: str,
    registry: ToolRegistry | None,
    compiler: ArgumentCompiler,
    refs: tuple[str, ...],
    issues: list[PlanIssue],
) -> tuple[tuple[Compiled | None, Any, tuple[Compiled, ...]], tuple[str, ...]]:
    """A step's fallback chain and condition, checked and compiled.

    Returns (the fallback's compiled arguments, the compiled condition, the further fallbacks'
    compiled arguments) and the step's references with theirs.
    """
    fb_args: Compiled | None = None
    more_fb: tuple[Compiled, ...] = ()
    if s.fallback is not None:
        fb_args, more_fb, refs = _check_fallbacks(s.fallback, sid, registry, compiler, refs, issues)
    condition: Any = None
    if s.when is not None:
        condition, when_refs = compiler.condition(s.when)
        if when_refs:
            refs = tuple(dict.fromkeys([*refs, *when_refs]))
    return (fb_args, condition, more_fb), refs


def _check_fallbacks(
    fallback: Fallback,
    sid: str,
    registry: ToolRegistry | None,
    compiler: ArgumentCompiler,
    refs: tuple[str, ...],
    issues: list[PlanIssue],
) -> tuple[Compiled, tuple[Compiled, ...], tuple[str, ...]]:
    """Each link of a step's fallback chain checked like a step: its tool, its arguments, its references.

    Returns the first link's compiled arguments, the others', and the step's references with theirs.
    """
    compiled: list[Compiled] = []
    for n, link in enumerate(fallback.chain, 1):
        what = "The step's fallback" if n == 1 else f"The step's fallback #{n}"
        ok = _check_tool(link.tool, sid, registry, issues, what)
        args, link_refs, deferred = compiler.arguments(link.arguments)
        compiled.append(args)
        refs = tuple(dict.fromkeys([*refs, *link_refs]))
        if ok and registry is not None:
            for problem in registry.argument_problems(link.tool, link.arguments, deferred):
                issues.append(
                    PlanIssue(
                        code="invalid_arguments",
                        step=sid,
                        message=f"Fallback arguments for tool {link.tool!r} are invalid: {problem}."
                        if n == 1
                        else f"Arguments of fallback #{n} (tool {link.tool!r}) are invalid: {problem}.",
                    )
                )
    return compiled[0], tuple(compiled[1:]), refs


def _check_tool(name: str, sid: str, registry: ToolRegistry | None, issues: list[PlanIssue], what: str) -> bool:
    if not name:
        return False  # reported by the parser
    if name in META_TOOL_NAMES:
        issues.append(
            PlanIssue(
                code="meta_tool",
                step=sid,
                message=f"{what} calls {name!r}, which runs plans or code itself; plans cannot nest. "
                "Put the calls you need directly into this plan as steps.",
            )
        )
        return False
    if registry is not None and name not in registry:
        close = difflib.get_close_matches(name, registry.names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        issues.append(
            PlanIssue(
                code="unknown_tool",
                step=sid,
                message=f"{what} calls unknown tool {name!r}.{hint} "
                f"Known tools: {', '.join(registry.names) or '(none)'}.",
            )
        )
        return False
    return True


def _check_alternatives(s: Step, registry: ToolRegistry | None, issues: list[PlanIssue]) -> bool:
    """A step's ``one_of``: known tools, none a meta-tool, one safety class, none destructive."""
    sid = s.id
    first = len(issues)
    if s.tool != inline_group_name(s.one_of):
        issues.append(
            PlanIssue(
                code="invalid_field",
                step=sid,
                message=f"A step with alternatives has tool {inline_group_name(s.one_of)!r} (its one_of, sorted, "
                f"joined by '|'), not {s.tool!r}. Set tool to {inline_group_name(s.one_of)!r}.",
            )
        )
    for name in s.one_of:
        _check_tool(name, sid, registry, issues, "The step's one_of")
        if registry is not None and registry.group(name) is not None:
            issues.append(
                PlanIssue(
                    code="invalid_alternatives",
                    step=sid,
                    message=f"'one_of' names the group {name!r}: list tools, not groups (or call the group itself).",
                )
            )
    if registry is None or len(issues) > first:
        return False
    problem = alternatives_problem(s.one_of, {n: registry.definition(n) for n in s.one_of})
    if problem is not None:
        issues.append(PlanIssue(code="invalid_alternatives", step=sid, message=problem))
        return False
    return True


def _report_duplicates(dups: Mapping[str, list[int]], issues: list[PlanIssue]) -> None:
    for sid, positions in dups.items():
        for n in positions[1:]:
            issues.append(
                PlanIssue(
                    code="duplicate_id",
                    step=sid,
                    message=f"Step #{n} uses id {sid!r}, which step #{positions[0]} already uses. "
                    "Give every step an id of its own.",
                )
            )


def _check(plan: Plan, registry: ToolRegistry | None, max_steps: int, issues: list[PlanIssue]) -> CompiledPlan:
    if not plan.steps:
        issues.append(PlanIssue(code="empty_plan", message="The plan has no steps. Add at least one step."))
    if len(plan.steps) > max_steps and plan.dialect != "batch":
        issues.append(
            PlanIssue(
                code="too_many_steps",
                message=f"The plan has {len(plan.steps)} steps; the limit is {max_steps}. "
                "Split the work into smaller plans.",
            )
        )
    ids = dict.fromkeys([s.id for s in plan.steps])  # ordered, with O(1) membership
    # Ids used more than once -> their positions (rare): every issue of such a step names its position.
    dups = duplicate_positions([s.id for s in plan.steps]) if len(ids) < len(plan.steps) else None
    if dups:
        _report_duplicates(dups, issues)
    id_set = frozenset(ids)
    unreadable_args = {i.step for i in issues if i.code == "invalid_arguments_json"} if issues else frozenset()

    compiled_steps: dict[str, CompiledStep] = {}
    deps: dict[str, tuple[str, ...]] = {}
    # The steps with ordering edges: usually none, and then no dict of its own (one object fewer per
    # plan for the garbage collector to count: a plan's run sits near a young collection's threshold).
    after: dict[str, tuple[str, ...]] | None = None
    sid = ""  # the step being checked (read by warn and error)

    def warn(code: str, message: str) -> None:
        issues.append(PlanIssue(code=code, step=sid, message=message, severity="warning"))

    def error(code: str, message: str) -> None:
        issues.append(PlanIssue(code=code, step=sid, message=message))

    compiler = ArgumentCompiler(id_set, warn=warn, error=error)
    if registry is not None:
        compiler.output_schemas = (plan.steps, registry)
    batch = plan.dialect == "batch"
    backward = False  # whether some step depends on a later one (only then can there be a cycle)
    callable_tools = frozenset(registry.names).difference(META_TOOL_NAMES) if registry is not None else frozenset()
    occurrences: dict[str, int] = {}  # of each duplicated id so far
    # What is wrong with the arguments of a step whose every argument holds a reference depends
    # only on its tool and the arguments' names: checked once per plan (a chain or fan-out of a tool).
    by_names: dict[tuple[str, frozenset[str]], list[str]] = {}
    for s in plan.steps:
        sid = s.id
        first_issue = len(issues)
        alternatives_ok = False
        if s.one_of:  # alternatives: each is checked here, and the arguments against each below
            tool_ok = False
            alternatives_ok = _check_alternatives(s, registry, issues)
        else:
            tool_ok = s.tool in callable_tools or _check_tool(s.tool, sid, registry, issues, "The step")
        if batch:  # no data flow between batch steps
            args: Compiled = literal(dict(s.arguments))
            refs: tuple[str, ...] = ()
            deferred: frozenset[str] = frozenset()
        else:
            args, refs, deferred = compiler.arguments(s.arguments)
        if tool_ok and registry is not None and sid not in unreadable_args:
            if deferred and len(deferred) == len(s.arguments):  # every argument holds a reference
                key = (s.tool, deferred)
                try:
                    problems = by_names[key]
                except KeyError:
                    problems = by_names[key] = registry.argument_problems(s.tool, s.arguments, deferred)
            else:
                problems = registry.argument_problems(s.tool, s.arguments, deferred)
            for problem in problems:
                error("invalid_arguments", f"Arguments for tool {s.tool!r} are invalid: {problem}.")
        elif alternatives_ok and registry is not None and sid not in unreadable_args:
            for problem in registry.alternatives_problems(s.one_of, s.arguments, deferred):
                error("invalid_arguments", f"Arguments for the step's alternatives are invalid: {problem}.")
        # (fallback arguments, condition, more fallbacks' arguments): rare, the common step pays two tests
        rare: tuple[Compiled | None, Any, tuple[Compiled, ...]] | None = None
        if s.fallback is not None or s.when is not None:
            rare, refs = _check_rare(s, sid, registry, compiler, refs, issues)
        for d in s.depends_on:
            if d not in id_set:
                error("unknown_dependency", f"'depends_on' names step {d!r}, which is not in the plan.")
        step_deps = step_dependencies(s, refs) if s.depends_on else refs  # (refs: distinct already)
        if sid in step_deps:
            error(
                "self_reference",
                f"Step {sid!r} refers to its own output; a step can only use earlier results.",
            )
            step_deps = tuple(d for d in step_deps if d != sid)
        if s.depends_on:
            step_deps = tuple(d for d in step_deps if d in id_set)  # unknown ones are reported above
        if not backward:
            for d in step_deps:
                if d not in compiled_steps:
                    backward = True  # a dependency on a later step: there may be a cycle
                    break
        if s.after:  # (rare: the common step pays for this test only)
            step_after = _check_after(s, step_deps, id_set, error)
            if step_after:
                if after is None:
                    after = {}
                after.setdefault(sid, step_after)  # (a duplicate id's later step: the plan is invalid anyway)
                if not backward:
                    backward = any(d not in compiled_steps for d in step_after)
        if dups is not None and sid in dups:
            k = occurrences[sid] = occurrences.get(sid, -1) + 1
            issues[first_issue:] = name_by_position(issues[first_issue:], sid, dups[sid][k], dups[sid])
            if k:
                continue  # checked, but the plan is invalid: the first step with the id stands for it
        deps[sid] = step_deps
        if rare is None:  # (CompiledStep's fields by position: step, arguments, fallback_arguments, deps...)
            compiled_steps[sid] = _compiled_at(s, args, None, step_deps)
        else:
            compiled_steps[sid] = _compiled_at(s, args, rare[0], step_deps, rare[1], rare[2])

    for cycle in find_cycles(ordering(deps, after or _NO_AFTER)) if backward else ():
        issues.append(
            PlanIssue(
                code="cycle",
                step=cycle[0],
                message=f"Steps form a cycle: {' -> '.join(cycle)}. Remove one reference or dependency to break it.",
            )
        )
    for out in plan.output_steps:
        if out not in id_set:
            issues.append(
                PlanIssue(
                    code="unknown_output_step",
                    step=out,
                    message=f"'output_steps' names {out!r}, which is not a step. Known steps: {', '.join(ids)}.",
                )
            )
    warnings = tuple(i for i in issues if i.severity == "warning") if issues else ()
    return _new_compiled_plan(
        plan=plan, steps=compiled_steps, warnings=warnings, deps=deps, after=_NO_AFTER if after is None else after
    )


def _check_after(
    s: Step, step_deps: tuple[str, ...], id_set: frozenset[str], error: Callable[[str, str], None]
) -> tuple[str, ...]:
    """A step's ``after`` ids, checked: each names another step of the plan. Those in ``step_deps`` are dropped."""
    out: list[str] = []
    for d in dict.fromkeys(s.after):
        if d == s.id:
            error("self_reference", f"Step {d!r} lists itself in 'after'; a step can only run after other steps.")
        elif d not in id_set:
            error("unknown_dependency", f"'after' names step {d!r}, which is not in the plan.")
        elif d not in step_deps:
            out.append(d)
    return tuple(out)


def compile_calls(calls: Sequence[tuple[str, str, Mapping[str, Any]]]) -> CompiledPlan:
    """A batch plan of independent ``(step_id, tool, arguments)`` calls, without schema checks.

    Used for a model turn's native tool calls: each call is validated when it runs, so one bad call
    fails alone instead of rejecting its siblings.
    """
    steps = {sid: _new_step(id=sid, tool=tool, arguments=args) for sid, tool, args in calls}
    compiled = {
        sid: _new_compiled(step=s, arguments=literal(dict(s.arguments)), fallback_arguments=None, deps=())
        for sid, s in steps.items()
    }
    return _new_compiled_plan(
        plan=_new_plan(steps=tuple(steps.values()), dialect="batch"),
        steps=compiled,
        deps=dict.fromkeys(steps, ()),
        after=_NO_AFTER,
    )
