"""Declarations: what a plan said it would do, for the audit to compare with what ran.

Two sources, one `Declaration`:

- the declared-plan dialect, a description of intended calls that is not run::

      {"ToolCallPlan": {
         "planningContext": {"goal": "...", "constraints": {"maxToolCalls": 5, "maxCost": 2},
                             "policy": {"strategy": "thompson", "preferGeneralMethods": true}},
         "plannedSequence": [{"toolName": "search", "rationale": "...", "expectedOutcome": "...",
                              "fallbackOnFailure": "other_search"}]}}

  (the ``ToolCallPlan`` wrapper is optional; ``constraints`` may also be a list of sentences, and
  ``policy`` a string such as ``"ucb1, prefer_general_methods"``);
- a native plan: its ``goal``, ``budget``, ``policy`` and each step's ``rationale`` and
  ``expected_outcome`` (`declaration_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from .._errors import PlanIssue, PlanValidationError
from .._json import JSONTextError, loads
from .._numbers import finite_number
from ..plan import Budget, Plan
from ._policy import PreferGeneral, parse_policy
from ._strategies import Strategy

__all__ = ("DeclaredCall", "DeclaredPolicy", "Declaration", "declaration_of", "parse_declaration")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredCall:
    """One intended call.

    Attributes:
        id: Its id: the step id of a native plan, else its position from 1 (``"1"``, ``"2"``...).
        tool: The tool (or group) it intends to call.
        rationale: Why.
        expected_outcome: What it should give.
        fallback: The tool to call if it fails (``fallbackOnFailure`` when it names a tool).
        fallback_note: ``fallbackOnFailure`` when it is a sentence rather than a tool name.
        depends_on: Ids of intended calls that must end before this one starts.
    """

    id: str
    tool: str
    rationale: str | None = None
    expected_outcome: str | None = None
    fallback: str | None = None
    fallback_note: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredPolicy:
    """A declared explore/exploit policy: a strategy, and whether general methods are preferred."""

    strategy: Strategy | None = None
    prefer_general_methods: PreferGeneral | None = None
    text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Declaration:
    """What a plan declared: goal, limits, policy and intended calls.

    Attributes:
        goal: What it is for.
        constraints: Constraints as written that are not budget limits (sentences).
        budget: The budget limits it declared (``maxToolCalls``, ``maxLatency``, ``maxCost``, per tool).
        policy: Its explore/exploit policy.
        calls: The intended calls, in order.
        source: ``"declared"`` (a ``ToolCallPlan``) or ``"native"`` (a plan's own fields).
    """

    goal: str | None = None
    constraints: tuple[str, ...] = ()
    budget: Budget | None = None
    policy: DeclaredPolicy | None = None
    calls: tuple[DeclaredCall, ...] = ()
    source: str = "declared"

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        out: dict[str, Any] = {"source": self.source, "goal": self.goal, "constraints": list(self.constraints)}
        if self.budget is not None:
            b = self.budget
            out["budget"] = {
                k: v
                for k, v in (
                    ("max_tool_calls", b.max_tool_calls),
                    ("max_tool_calls_per_tool", dict(b.max_tool_calls_per_tool) or None),
                    ("max_cost", b.max_cost),
                    ("max_latency", b.max_latency),
                )
                if v is not None
            }
        if self.policy is not None:
            out["policy"] = {
                "strategy": self.policy.strategy,
                "prefer_general_methods": self.policy.prefer_general_methods,
            }
        out["calls"] = [{k: v for k, v in vars_of(c).items() if v is not None} for c in self.calls]
        return out


def vars_of(call: DeclaredCall) -> dict[str, Any]:
    """A declared call's fields as JSON data."""
    return {
        "id": call.id,
        "tool": call.tool,
        "rationale": call.rationale,
        "expected_outcome": call.expected_outcome,
        "fallback": call.fallback,
        "fallback_note": call.fallback_note,
        "depends_on": list(call.depends_on) or None,
    }


class _Issues(list[PlanIssue]):
    def error(self, code: str, message: str, step: str | None = None) -> None:
        self.append(PlanIssue(code=code, message=message, step=step))


_BUDGET_KEYS = {
    "maxtoolcalls": "max_tool_calls",
    "max_tool_calls": "max_tool_calls",
    "maxcost": "max_cost",
    "max_cost": "max_cost",
    "maxlatency": "max_latency",
    "max_latency": "max_latency",
    "maxtoolcallspertool": "max_tool_calls_per_tool",
    "max_tool_calls_per_tool": "max_tool_calls_per_tool",
    "maxcalls": "max_tool_calls_per_tool",  # {"maxCalls": {"send_email": 1}}
    "max_calls": "max_tool_calls_per_tool",
}


def parse_declaration(source: Any) -> Declaration:
    """Read a declared plan (``ToolCallPlan``; a dict or JSON text) or a native `Plan` into a `Declaration`.

    Raises:
        PlanValidationError: it is neither; ``.issues`` says what is wrong, each with a fix.
    """
    if isinstance(source, Plan):
        return declaration_of(source)
    issues = _Issues()
    data: Any = source
    if isinstance(source, (str, bytes)):
        try:
            data = loads(source)
        except JSONTextError as exc:
            raise PlanValidationError(
                [PlanIssue(code="invalid_json", message=f"The declared plan is not valid JSON: {exc.message}.")]
            ) from None
    if isinstance(data, dict) and isinstance(data.get("ToolCallPlan"), dict):
        data = data["ToolCallPlan"]
    if not isinstance(data, dict) or "plannedSequence" not in data:
        if isinstance(data, dict) and isinstance(data.get("steps"), list):
            from ..plan import parse_plan

            return declaration_of(parse_plan(data))
        raise PlanValidationError(
            [
                PlanIssue(
                    code="invalid_declaration",
                    message='A declared plan is an object {"planningContext": {"goal": ..., "constraints": ..., '
                    '"policy": ...}, "plannedSequence": [{"toolName": ..., "rationale": ..., "expectedOutcome": ..., '
                    '"fallbackOnFailure": ...}]} (optionally inside {"ToolCallPlan": ...}).',
                )
            ]
        )
    obj = cast(dict[str, Any], data)
    context: Any = obj.get("planningContext") or {}
    if not isinstance(context, dict):
        issues.error("invalid_field", "'planningContext' must be an object with 'goal', 'constraints' and 'policy'.")
        context = {}
    goal = context.get("goal")
    constraints, budget = _constraints(context.get("constraints"), issues)
    policy = _policy(context.get("policy"), issues)
    calls = _sequence(obj.get("plannedSequence"), issues)
    if issues:
        raise PlanValidationError(issues)
    return Declaration(
        goal=goal if isinstance(goal, str) else None,
        constraints=constraints,
        budget=budget,
        policy=policy,
        calls=calls,
        source="declared",
    )


def _number(raw: Any, key: str, issues: _Issues) -> float | None:
    if isinstance(raw, str):  # "30s", "2.5"
        text = raw.strip().lower().removesuffix("seconds").removesuffix("s").strip()
        try:
            raw = float(text)
        except ValueError:
            issues.error("invalid_field", f"Constraint {key!r} must be a number, got {raw[:40]!r}.")
            return None
    if not finite_number(raw) or raw < 0:
        issues.error("invalid_field", f"Constraint {key!r} must be a number >= 0, got {raw!r}.")
        return None
    return float(raw)


def _constraints(raw: Any, issues: _Issues) -> tuple[tuple[str, ...], Budget | None]:
    if raw is None:
        return (), None
    if isinstance(raw, str):
        return (raw,), None
    if isinstance(raw, list):
        return tuple(str(x) for x in raw), None
    if not isinstance(raw, dict):
        issues.error(
            "invalid_field", "'constraints' must be an object (e.g. {\"maxToolCalls\": 5}) or a list of sentences."
        )
        return (), None
    limits: dict[str, Any] = {}
    texts: list[str] = []
    for key, value in cast(dict[str, Any], raw).items():
        name = _BUDGET_KEYS.get(key.lower())
        if name is None:
            texts.append(f"{key}: {value}")
        elif name == "max_tool_calls_per_tool":
            if not isinstance(value, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()
            ):
                issues.error("invalid_field", f"Constraint {key!r} must map tool names to whole numbers >= 0.")
                continue
            limits[name] = dict(cast(dict[str, int], value))
        else:
            number = _number(value, key, issues)
            if number is not None:
                limits[name] = int(number) if name == "max_tool_calls" else number
    budget = Budget(**limits) if limits else None
    return tuple(texts), budget


def _policy(raw: Any, issues: _Issues) -> DeclaredPolicy | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        named, said = parse_policy(raw)
        return DeclaredPolicy(strategy=named, prefer_general_methods=said, text=raw)
    if not isinstance(raw, dict):
        issues.error("invalid_field", '\'policy\' must be a string such as "thompson" or an object {"strategy": ...}.')
        return None
    obj = cast(dict[str, Any], raw)
    words: list[str] = []
    for key in ("strategy", "explorationStrategy", "exploration", "exploreExploit", "explore_exploit"):
        if isinstance(obj.get(key), str):
            words.append(obj[key])
    strategy, _ = parse_policy(",".join(words))
    prefer: PreferGeneral | None = None
    for key in ("preferGeneralMethods", "prefer_general_methods"):
        value = obj.get(key)
        if value is True:
            prefer = "always"
        elif value is False:
            prefer = "never"
        elif value in ("when_tight", "always", "never"):
            prefer = value
    return DeclaredPolicy(strategy=strategy, prefer_general_methods=prefer, text=str(raw))


def _sequence(raw: Any, issues: _Issues) -> tuple[DeclaredCall, ...]:
    if not isinstance(raw, list) or not raw:
        issues.error("invalid_field", "'plannedSequence' must be a non-empty list of {\"toolName\": ...} entries.")
        return ()
    calls: list[DeclaredCall] = []
    entries: list[Any] = raw
    names = [e.get("toolName") if isinstance(e, dict) else None for e in entries]
    for i, entry in enumerate(entries):
        cid = str(i + 1)
        if not isinstance(entry, dict) or not isinstance(entry.get("toolName"), str) or not entry["toolName"]:
            issues.error("invalid_step", f"plannedSequence entry #{i + 1} needs a 'toolName' (a string).", cid)
            continue
        e = cast(dict[str, Any], entry)
        fallback_raw = e.get("fallbackOnFailure")
        fallback = note = None
        if isinstance(fallback_raw, str) and fallback_raw.strip():
            text = fallback_raw.strip()
            if " " in text:
                note = text
            else:
                fallback = text
        elif isinstance(fallback_raw, dict) and isinstance(fallback_raw.get("toolName"), str):
            fallback = fallback_raw["toolName"]
        calls.append(
            DeclaredCall(
                id=cid,
                tool=e["toolName"],
                rationale=_text(e.get("rationale")),
                expected_outcome=_text(e.get("expectedOutcome")),
                fallback=fallback,
                fallback_note=note,
                depends_on=_depends(e.get("dependsOn"), names, i, issues),
            )
        )
    return tuple(calls)


def _text(raw: Any) -> str | None:
    return raw if isinstance(raw, str) else None


def _depends(raw: Any, names: Sequence[Any], index: int, issues: _Issues) -> tuple[str, ...]:
    """``dependsOn``: entry numbers (from 1) or tool names of earlier entries."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= len(names) and item != index + 1:
            out.append(str(item))
        elif isinstance(item, str) and item in names[:index]:
            out.append(str(names.index(item) + 1))
        else:
            issues.error(
                "unknown_dependency",
                f"plannedSequence entry #{index + 1}: 'dependsOn' {item!r} is neither an entry number nor the "
                "toolName of an earlier entry.",
                str(index + 1),
            )
    return tuple(out)


def declaration_of(plan: Plan) -> Declaration:
    """A native plan's own declaration: its goal, budget, policy, and each step's tool, rationale and outcome."""
    strategy, prefer = parse_policy(plan.policy)
    return Declaration(
        goal=plan.goal,
        budget=plan.budget if plan.budget is not None and not plan.budget.unlimited else None,
        policy=DeclaredPolicy(strategy=strategy, prefer_general_methods=prefer, text=plan.policy)
        if plan.policy
        else None,
        calls=tuple(
            DeclaredCall(
                id=s.id,
                tool=s.tool,
                rationale=s.rationale,
                expected_outcome=s.expected_outcome,
                fallback=s.fallback.tool if s.fallback is not None else None,
                depends_on=s.depends_on,
            )
            for s in plan.steps
        ),
        source="native",
    )
