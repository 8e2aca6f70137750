"""Declarations: what a plan said it would do, for the audit to compare with what ran.

Two sources, one `Declaration`:

- the declared-plan dialect, a description of intended calls that is not run::

      {"ToolCallPlan": {
         "planId": "p2", "replaces": "p1", "executionState": "Planned",
         "planningContext": {"goal": "...", "constraints": {"maxToolCalls": 5, "maxCost": 2, "scaleFactor": 2},
                             "policy": {"strategy": "ThompsonSampling", "preferGeneralMethods": true}},
         "plannedSequence": [{"toolName": "search", "rationale": "...", "expectedOutcome": "...",
                              "fallbackOnFailure": {"toolName": "other_search", "rationale": "..."}}]}}

  (the ``ToolCallPlan`` or ``toolCallPlan`` wrapper is optional; ``constraints`` may also be a list
  of sentences, and ``policy`` a string such as ``"ucb1, prefer_general_methods"``; ``scaleFactor``
  multiplies every declared limit, counts rounded down; ``fallbackOnFailure`` is a tool name or an
  intent, which may have its own fallback, at most `MAX_FALLBACK_DEPTH` deep);
- a native plan: its ``goal``, ``budget``, ``policy`` and each step's ``rationale`` and
  ``expected_outcome`` (`declaration_of`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .._errors import PlanIssue, PlanValidationError
from .._json import JSONTextError, loads
from .._numbers import finite_number
from ..plan import Budget, Plan
from ._policy import PreferGeneral, policy_settings
from ._state import ExecutionState, parse_state
from ._strategies import Strategy

__all__ = ("MAX_FALLBACK_DEPTH", "DeclaredCall", "DeclaredPolicy", "Declaration", "declaration_of", "parse_declaration")

#: How many fallbacks a declared call may chain (``fallbackOnFailure`` inside ``fallbackOnFailure``).
MAX_FALLBACK_DEPTH = 3


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
        fallbacks: The whole chain of fallback tools, in the order they are tried (``fallback`` first).
    """

    id: str
    tool: str
    rationale: str | None = None
    expected_outcome: str | None = None
    fallback: str | None = None
    fallback_note: str | None = None
    depends_on: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredPolicy:
    """A declared explore/exploit policy: a strategy, its numbers, and whether general methods are preferred.

    ``exploration_rate`` is ``epsilon_greedy``'s (``explorationRate``); ``temperature`` is ``softmax``'s.
    """

    strategy: Strategy | None = None
    prefer_general_methods: PreferGeneral | None = None
    text: str = ""
    exploration_rate: float | None = None
    temperature: float | None = None


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
        plan_id: Its ``planId``, if it has one.
        replaces: The ``planId`` of the plan it replaces (a replan), if any.
        execution_state: Its ``executionState`` as declared (``Planned`` when not said);
            `toolplan.policy.execution_state` gives it as the run goes.
        scale_factor: Its ``scaleFactor``: ``budget`` holds the limits already multiplied by it.
        declared_at: When it was declared (Unix seconds), if known: a replan's calls are judged
            against the declaration in force when each was made.
    """

    goal: str | None = None
    constraints: tuple[str, ...] = ()
    budget: Budget | None = None
    policy: DeclaredPolicy | None = None
    calls: tuple[DeclaredCall, ...] = ()
    source: str = "declared"
    plan_id: str | None = None
    replaces: str | None = None
    execution_state: ExecutionState = field(default_factory=ExecutionState)
    scale_factor: float | None = None
    declared_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        out: dict[str, Any] = {"source": self.source, "goal": self.goal, "constraints": list(self.constraints)}
        for key, value in (
            ("plan_id", self.plan_id),
            ("replaces", self.replaces),
            ("scale_factor", self.scale_factor),
            ("declared_at", self.declared_at),
        ):
            if value is not None:
                out[key] = value
        out["execution_state"] = self.execution_state.to_dict()
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
            if self.policy.exploration_rate is not None:
                out["policy"]["exploration_rate"] = self.policy.exploration_rate
            if self.policy.temperature is not None:
                out["policy"]["temperature"] = self.policy.temperature
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
        "fallbacks": list(call.fallbacks) if len(call.fallbacks) > 1 else None,
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
    "scalefactor": "scale_factor",
    "scale_factor": "scale_factor",
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
    if isinstance(data, dict):
        for wrapper in ("ToolCallPlan", "toolCallPlan"):
            if isinstance(data.get(wrapper), dict):  # its planId and replaces may sit beside the wrapper
                outer = cast(dict[str, Any], data)
                data = {**{k: outer[k] for k in ("planId", "replaces") if k in outer}, **outer[wrapper]}
                break
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
    constraints, budget, scale = _constraints(context.get("constraints"), issues)
    policy = _policy(context.get("policy"), issues)
    calls = _sequence(obj.get("plannedSequence"), issues)
    plan_id = _plan_id(obj.get("planId"), "planId", issues)
    replaces = _plan_id(next((obj[k] for k in ("replaces", "replacesPlanId") if k in obj), None), "replaces", issues)
    state, problem = parse_state(obj.get("executionState"))
    if problem:
        issues.error("invalid_field", problem)
    if issues:
        raise PlanValidationError(issues)
    return Declaration(
        goal=goal if isinstance(goal, str) else None,
        constraints=constraints,
        budget=budget,
        policy=policy,
        calls=calls,
        source="declared",
        plan_id=plan_id,
        replaces=replaces,
        execution_state=state,
        scale_factor=scale,
    )


def _plan_id(raw: Any, key: str, issues: _Issues) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str) and 0 < len(raw) <= 200:
        return raw
    issues.error("invalid_field", f"{key!r} must be a plan id (a string of 1 to 200 characters), got {raw!r:.60}.")
    return None


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


def _constraints(raw: Any, issues: _Issues) -> tuple[tuple[str, ...], Budget | None, float | None]:
    if raw is None:
        return (), None, None
    if isinstance(raw, str):
        return (raw,), None, None
    if isinstance(raw, list):
        return tuple(str(x) for x in raw), None, None
    if not isinstance(raw, dict):
        issues.error(
            "invalid_field", "'constraints' must be an object (e.g. {\"maxToolCalls\": 5}) or a list of sentences."
        )
        return (), None, None
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
    scale = limits.pop("scale_factor", None)
    if scale is not None and not 0 < scale < math.inf:
        issues.error("invalid_field", f"'scaleFactor' must be a number above 0 (1.0 is the baseline), got {scale:g}.")
        scale = None
    if scale is not None:  # every limit times the factor; counts of calls rounded down
        for name in ("max_cost", "max_latency"):
            if name in limits:
                limits[name] *= scale
        if "max_tool_calls" in limits:
            limits["max_tool_calls"] = math.floor(limits["max_tool_calls"] * scale)
        if "max_tool_calls_per_tool" in limits:
            limits["max_tool_calls_per_tool"] = {
                t: math.floor(n * scale) for t, n in limits["max_tool_calls_per_tool"].items()
            }
    budget = Budget(**limits) if limits else None
    return tuple(texts), budget, scale


def _policy_of_text(text: str) -> DeclaredPolicy:
    """A policy written as text (``"thompson"``, ``"epsilon_greedy,explorationRate=0.2"``), as declared."""
    said = policy_settings(text)
    return DeclaredPolicy(
        strategy=said.strategy,
        prefer_general_methods=said.prefer_general_methods,
        text=text,
        exploration_rate=said.exploration_rate,
        temperature=said.temperature,
    )


def _policy(raw: Any, issues: _Issues) -> DeclaredPolicy | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return _policy_of_text(raw)
    if not isinstance(raw, dict):
        issues.error("invalid_field", '\'policy\' must be a string such as "thompson" or an object {"strategy": ...}.')
        return None
    obj = cast(dict[str, Any], raw)
    words: list[str] = []
    for key in ("strategy", "explorationStrategy", "exploration", "exploreExploit", "explore_exploit"):
        if isinstance(obj.get(key), str):
            words.append(obj[key])
    strategy = policy_settings(",".join(words)).strategy
    if words and strategy is None:
        issues.error(
            "invalid_field",
            f"Unknown strategy {', '.join(words)!r:.80}. Name one of Greedy, EpsilonGreedy, UCB, "
            "ThompsonSampling or Softmax (or toolplan's greedy, epsilon_greedy, ucb1, thompson, softmax).",
        )
    rate = _fraction(obj, ("explorationRate", "exploration_rate", "epsilon"), issues, upper=1.0)
    temperature = _fraction(obj, ("temperature",), issues, upper=None)
    prefer: PreferGeneral | None = None
    for key in ("preferGeneralMethods", "prefer_general_methods"):
        value = obj.get(key)
        if value is True:
            prefer = "always"
        elif value is False:
            prefer = "never"
        elif value in ("when_tight", "always", "never"):
            prefer = value
    return DeclaredPolicy(
        strategy=strategy,
        prefer_general_methods=prefer,
        text=str(raw),
        exploration_rate=rate,
        temperature=temperature,
    )


def _fraction(obj: dict[str, Any], keys: tuple[str, ...], issues: _Issues, *, upper: float | None) -> float | None:
    """A policy's number: ``explorationRate`` from 0 to 1, ``temperature`` above 0."""
    key = next((k for k in keys if k in obj), None)
    if key is None or obj[key] is None:
        return None
    value = obj[key]
    ok = finite_number(value) and (0 <= value <= upper if upper is not None else value > 0)
    if not ok:
        want = f"from 0 to {upper:g}" if upper is not None else "above 0"
        issues.error("invalid_field", f"Policy {key!r} must be a number {want}, got {value!r:.40}.")
        return None
    return float(value)


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
        chain, note = _fallbacks(e.get("fallbackOnFailure"), cid, issues)
        calls.append(
            DeclaredCall(
                id=cid,
                tool=e["toolName"],
                rationale=_text(e.get("rationale")),
                expected_outcome=_text(e.get("expectedOutcome")),
                fallback=chain[0] if chain else None,
                fallback_note=note,
                depends_on=_depends(e.get("dependsOn"), names, i, issues),
                fallbacks=chain,
            )
        )
    return tuple(calls)


def _fallbacks(raw: Any, cid: str, issues: _Issues) -> tuple[tuple[str, ...], str | None]:
    """``fallbackOnFailure``: a tool name, a sentence, or an intent that may have its own fallback.

    Returns the chain of tools (outermost first) and the sentence, if it ended in one.
    """
    chain: list[str] = []
    while raw is not None:
        if len(chain) == MAX_FALLBACK_DEPTH:
            issues.error(
                "fallback_too_deep",
                f"plannedSequence entry #{cid}: 'fallbackOnFailure' is nested more than {MAX_FALLBACK_DEPTH} deep. "
                f"Declare at most {MAX_FALLBACK_DEPTH} fallbacks, one inside the other.",
                cid,
            )
            break
        if isinstance(raw, str):
            text = raw.strip()
            if " " in text:
                return tuple(chain), text
            if text:
                chain.append(text)
            break
        if isinstance(raw, dict) and isinstance(raw.get("toolName"), str) and raw["toolName"]:
            chain.append(raw["toolName"])
            raw = raw.get("fallbackOnFailure")
            continue
        issues.error(
            "invalid_field",
            f"plannedSequence entry #{cid}: 'fallbackOnFailure' must be a tool name or an intent "
            '{"toolName": ..., "rationale": ..., "fallbackOnFailure": ...}.',
            cid,
        )
        break
    return tuple(chain), None


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
    return Declaration(
        goal=plan.goal,
        budget=plan.budget if plan.budget is not None and not plan.budget.unlimited else None,
        policy=_policy_of_text(plan.policy) if plan.policy else None,
        calls=tuple(
            DeclaredCall(
                id=s.id,
                tool=s.tool,
                rationale=s.rationale,
                expected_outcome=s.expected_outcome,
                fallback=s.fallback.tool if s.fallback is not None else None,
                depends_on=s.depends_on,
                fallbacks=tuple(link.tool for link in s.fallback.chain) if s.fallback is not None else (),
            )
            for s in plan.steps
        ),
        source="native",
    )
