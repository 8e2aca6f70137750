"""Writing a plan in a dialect: the inverse of the parsers in `._parse`.

``parse_plan(dump_plan(plan, dialect), dialect=dialect)`` is ``plan`` again, up to what the dialect
decides itself: the chaining dialect names each step after its tool (``search``, ``search_2``, ...)
and lists the tools in an order where each comes after its dependencies; a batch numbers its steps.
A plan the dialect cannot say (a step's timeout in chaining; a reference in a batch) is refused
with coded issues, never written as a different plan.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Mapping
from typing import Any

from .._errors import PlanIssue, PlanValidationError, UserError
from ._ir import Dialect, Plan, Step
from ._parse import BATCH_MAX_STEPS
from ._refs import ESCAPED_PREFIX, REF_PREFIX, TEMPLATE_RE, parse_path, unescape
from ._validate import ordering, validate_plan

__all__ = ("NOT_EXPRESSIBLE", "dump_plan")

#: The code of an issue saying that a valid plan cannot be written in the dialect asked for.
NOT_EXPRESSIBLE = "not_expressible"

_ID_RE = re.compile(r"[A-Za-z0-9_-]+")  # what a reference's first segment may be (as in `._refs`)
_CHAINING_DEFAULT_FAILURE_MODE = "fail_fast"  # what `_parse_chaining` assumes when none is written


def dump_plan(plan: Plan, dialect: Dialect = "native") -> dict[str, Any]:
    """``plan`` as JSON data in ``dialect`` (``"native"``, ``"chaining"`` or ``"batch"``).

    Chaining: ``{"tools": [{"name", "parameters", "dependsOn"}], "executionOrder": [...]}``. Each
    step is renamed after its tool (the k-th call of ``search`` in the order written is
    ``search_k``, the first plain ``search``) and every reference follows: ``"$ref:a.temp"`` becomes
    ``"{{get_weather.temp}}"`` (the same value, of the same type), ``{{a.temp}}`` inside text
    ``{{get_weather.temp}}``. ``dependsOn`` lists each step's dependencies (references and
    ``depends_on``), ``runAfter`` its ``after`` steps; ``executionOrder`` is the order of ``tools``,
    which puts every step after its dependencies; ``failure_mode`` and ``output_steps`` are written
    when they matter, and ``"parallel": true`` when steps of the plan may run at once (chaining
    plans run one step at a time by default). What no dialect runs differently is
    left out where the dialect has no place for it: ``goal``, ``rationale``, ``expected_outcome``.
    One rule changes with the dialect, as documented for it: a reference to a field that is missing
    at run time gives null in native plans and keeps its template text in chaining plans.

    Batch: ``{"steps": [{"tool", "args"}]}``, for plans of independent calls only.

    Raises:
        PlanValidationError: ``plan`` is invalid (validation's issues), or the dialect cannot say it:
            one `NOT_EXPRESSIBLE` issue per reason (a step's ``timeout``, ``retry`` or ``fallback``,
            a plan's ``budget``, ``policy`` or ``max_concurrency`` outside native plans; two steps
            whose chaining names collide; text that would turn into a reference; data flow in a batch).
        UserError: ``dialect`` is not a dialect.
    """
    if dialect not in ("native", "chaining", "batch"):
        raise UserError(f"Unknown plan dialect {dialect!r}; use 'native', 'chaining' or 'batch'.")
    report = validate_plan(plan, max_steps=max(1, len(plan.steps)))
    if report.compiled is None:
        raise PlanValidationError([*report.errors, *report.warnings])
    deps, after = report.compiled.deps, report.compiled.after
    if dialect == "native":
        return _native(plan)
    issues: list[PlanIssue] = []
    _unsayable_fields(plan, dialect, issues)
    if dialect == "chaining":
        data = _chaining(plan, deps, after, issues)
    else:
        data = _batch(plan, report.compiled.order, issues)
    if issues:
        raise PlanValidationError(issues)
    return data


def _native(plan: Plan) -> dict[str, Any]:
    data = plan.to_dict()
    if plan.policy is not None:
        data["policy"] = plan.policy
    b = plan.budget
    if b is not None and (not b.unlimited or b.warn_at is not None):
        budget: dict[str, Any] = {}
        for name in ("max_tool_calls", "max_cost", "max_latency"):
            value = getattr(b, name)
            if value is not None:
                budget[name] = value
        if b.max_tool_calls_per_tool:
            budget["max_tool_calls_per_tool"] = dict(b.max_tool_calls_per_tool)
        if b.warn_at is not None:
            budget["warn_at"] = b.warn_at
        data["budget"] = budget
    return data


def _issue(dialect: str, message: str, step: str | None = None) -> PlanIssue:
    return PlanIssue(
        code=NOT_EXPRESSIBLE, step=step, message=f"The plan cannot be written in the {dialect} dialect: {message}"
    )


def _unsayable_fields(plan: Plan, dialect: str, issues: list[PlanIssue]) -> None:
    """The fields that change how a plan runs and that only native plans can carry."""
    present = {
        "budget": plan.budget is not None and (not plan.budget.unlimited or plan.budget.warn_at is not None),
        "policy": plan.policy is not None,
        # Chaining plans run one step at a time, or in parallel ("parallel": true): no other limit.
        "max_concurrency": plan.max_concurrency is not None and (dialect != "chaining" or plan.max_concurrency != 1),
        "share_calls": not plan.share_calls,
    }
    for name in (name for name, there in present.items() if there):
        issues.append(_issue(dialect, f"it has no place for the plan's '{name}'. Leave it out."))
    for s in plan.steps:
        for name in ("timeout", "retry", "fallback"):
            if getattr(s, name) is not None:
                issues.append(_issue(dialect, f"it has no place for a step's '{name}'. Leave it out.", s.id))


def _order(steps: tuple[Step, ...], deps: Mapping[str, tuple[str, ...]]) -> list[Step]:
    """The steps with each after its dependencies, otherwise as written (a valid plan has no cycle)."""
    position = {s.id: i for i, s in enumerate(steps)}
    waiting = {s.id: len(deps[s.id]) for s in steps}
    dependents: dict[str, list[str]] = {s.id: [] for s in steps}
    for s in steps:
        for d in deps[s.id]:
            dependents[d].append(s.id)
    ready = [position[s.id] for s in steps if not waiting[s.id]]
    heapq.heapify(ready)
    out: list[Step] = []
    while ready:
        step = steps[heapq.heappop(ready)]
        out.append(step)
        for child in dependents[step.id]:
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, position[child])
    return out


def _chaining(
    plan: Plan, deps: Mapping[str, tuple[str, ...]], after: Mapping[str, tuple[str, ...]], issues: list[PlanIssue]
) -> dict[str, Any]:
    edges = ordering(deps, after)
    ordered = _order(plan.steps, edges)
    rename: dict[str, str] = {}
    owner: dict[str, str] = {}  # chaining name -> the step that has it
    counts: dict[str, int] = {}
    for s in ordered:
        k = counts[s.tool] = counts.get(s.tool, 0) + 1
        name = s.tool if k == 1 else f"{s.tool}_{k}"
        if name in owner:
            issues.append(
                _issue(
                    "chaining",
                    f"steps {owner[name]!r} and {s.id!r} would both be named {name!r} (a step is named after its "
                    f"tool, a repeated call gets _2, _3, ...). Call {s.tool!r} fewer times or use the native dialect.",
                    s.id,
                )
            )
        owner.setdefault(name, s.id)
        rename[s.id] = name
    writer = _Renamer(rename, issues)
    tools: list[dict[str, Any]] = []
    for s in ordered:
        writer.step = s.id
        entry: dict[str, Any] = {"name": s.tool, "parameters": writer.value(dict(s.arguments))}
        if deps[s.id]:
            entry["dependsOn"] = [rename[d] for d in deps[s.id]]
        if s.id in after:
            entry["runAfter"] = [rename[d] for d in after[s.id]]
        if s.when is not None:
            entry["when"] = writer.value(s.when)
        tools.append(entry)
    data: dict[str, Any] = {"tools": tools, "executionOrder": [s.tool for s in ordered]}
    if plan.output_steps:
        data["output_steps"] = [rename[o] for o in plan.output_steps]
    if plan.failure_mode != _CHAINING_DEFAULT_FAILURE_MODE:
        data["failure_mode"] = plan.failure_mode
    # Chaining plans run one step at a time unless they say otherwise: said when steps could overlap.
    one_by_one = all(a.id in edges[b.id] for a, b in itertools.pairwise(ordered))
    if plan.max_concurrency is None and not one_by_one:
        data["parallel"] = True
    return data


class _Renamer:
    """Rewrites the references of a step's arguments to the steps' new names."""

    def __init__(self, rename: Mapping[str, str], issues: list[PlanIssue]) -> None:
        self.rename = rename
        self.new_names = frozenset(rename.values())
        self.issues = issues
        self.step = ""  # the step whose arguments are being written
        self.unnamable: set[str] = set()  # steps already reported as impossible to refer to

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value  # (validation bounds the depth: a too deep value never gets here)

    def _name(self, old: str) -> str:
        """The new name of step ``old``, for a reference (which can only name an id)."""
        new = self.rename[old]
        if _ID_RE.fullmatch(new) is None and old not in self.unnamable:
            self.unnamable.add(old)
            self.issues.append(
                _issue(
                    "chaining",
                    f"step {self.step!r} uses its output, and a reference would have to name tool {new!r}, which "
                    "is not an id (letters, digits, '_' and '-' only). Use the native dialect.",
                    old,
                )
            )
        return new

    def _string(self, s: str) -> str:
        if s.startswith(REF_PREFIX):  # a whole-value reference (validated: it names a step)
            rest = s[len(REF_PREFIX) :].strip()
            found = _ID_RE.match(rest)
            assert found is not None  # validation rejects any other "$ref:" string
            new, path = self._name(found.group(0)), rest[found.end() :]
            # The chaining form, {{name.path}}, is the same value of the same type; a path with a
            # brace in it cannot stand in a template and keeps the $ref form, which chaining reads too.
            return f"$ref:{new}{path}" if "{" in path or "}" in path else f"{{{{{new}{path}}}}}"
        if "{{" not in s:
            return s
        parts: list[str] = []
        pos = 0
        for m in TEMPLATE_RE.finditer(s):
            expr = m.group(1)
            parsed = parse_path(expr)
            if parsed is None:
                continue
            head = parsed[0]
            if head in self.rename:
                parts.append(s[pos : m.start()])
                parts.append(f"{{{{{self._name(head)}{expr[len(head) :]}}}}}")
                pos = m.end()
            elif head in self.new_names:
                self.issues.append(
                    _issue(
                        "chaining",
                        f"the text {m.group(0)!r} is kept as text in this plan, but there a step is named "
                        f"{head!r} and it would insert that step's output. Reword the text.",
                        self.step,
                    )
                )
        parts.append(s[pos:])
        return "".join(parts)


def _batch(plan: Plan, deps: Mapping[str, tuple[str, ...]], issues: list[PlanIssue]) -> dict[str, Any]:
    if len(plan.steps) > BATCH_MAX_STEPS:
        issues.append(_issue("batch", f"a batch has at most {BATCH_MAX_STEPS} steps, this plan {len(plan.steps)}."))
    for s in plan.steps:
        if s.when is not None:
            issues.append(_issue("batch", "it has no place for a step's 'when' (every call runs). Leave it out.", s.id))
        if deps[s.id]:
            issues.append(
                _issue(
                    "batch",
                    f"it uses or waits for {', '.join(map(repr, deps[s.id]))}, and the steps of a batch all run "
                    "at once, without data flow. Use the native or chaining dialect.",
                    s.id,
                )
            )
    if plan.output_steps and set(plan.output_steps) != set(plan.step_ids):
        issues.append(_issue("batch", "a batch's outputs are all its steps; 'output_steps' names only some."))
    if plan.failure_mode != "fail_forward":
        issues.append(_issue("batch", "a batch's steps always all run ('fail_forward'); 'fail_fast' cannot be said."))
    # A batch reads its arguments literally: the text a plan means by '$$ref:' (an escape) is '$ref:'.
    return {"steps": [{"tool": s.tool, "args": _literal(dict(s.arguments))} for s in plan.steps]}


def _literal(value: Any) -> Any:
    if isinstance(value, str):
        return unescape(value) if ESCAPED_PREFIX in value else value
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value
