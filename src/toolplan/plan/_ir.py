from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._records import fast_init

__all__ = (
    "MAX_FALLBACK_DEPTH",
    "META_TOOL_NAMES",
    "Budget",
    "Dialect",
    "FailureMode",
    "Fallback",
    "MissingField",
    "Plan",
    "Step",
)

Dialect = Literal["native", "chaining", "batch"]
FailureMode = Literal["fail_forward", "fail_fast"]
# What a reference to a missing field becomes: null (native) or its own template text (chaining).
MissingField = Literal["null", "keep"]

#: Tools that run plans or code. A plan may not call them (no recursion).
META_TOOL_NAMES = frozenset({"execute_tool_plan", "execute_plan", "execute_code", "declare_plan", "search_tools"})
#: How many fallbacks a step may chain (a fallback's own ``fallback``, and so on).
MAX_FALLBACK_DEPTH = 3


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Fallback:
    """Another call to make when a step fails; its result stands in for the step's.

    When it fails too, its own ``fallback`` runs, and so on: a chain of at most `MAX_FALLBACK_DEPTH`.
    """

    kind: Literal["fallback"] = "fallback"
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    fallback: Fallback | None = None

    @property
    def chain(self) -> tuple[Fallback, ...]:
        """This fallback and the ones after it, in the order they are tried."""
        links: list[Fallback] = []
        link: Fallback | None = self
        while link is not None:
            links.append(link)
            link = link.fallback
        return tuple(links)

    def to_dict(self) -> dict[str, Any]:
        """``{"tool", "arguments"}``, and ``"fallback"`` when it has one."""
        out: dict[str, Any] = {"tool": self.tool, "arguments": dict(self.arguments)}
        if self.fallback is not None:
            out["fallback"] = self.fallback.to_dict()
        return out


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits enforced while a plan runs; steps that would exceed them end as ``not_run``.

    ``warn_at`` (a share, 0 < warn_at <= 1, such as 0.8) makes the run emit one `BudgetWarning`
    per limit (calls, calls of a tool, cost) when what is spent first reaches that share of it;
    an agent also tells the model. It sets no limit of its own.
    """

    kind: Literal["budget"] = "budget"
    max_tool_calls: int | None = None
    max_tool_calls_per_tool: Mapping[str, int] = field(default_factory=dict[str, int])
    max_cost: float | None = None
    max_latency: float | None = None
    warn_at: float | None = None

    def merged(self, other: Budget | None) -> Budget:
        """The tighter of two budgets, limit by limit."""
        if other is None:
            return self

        def low(a: Any, b: Any) -> Any:
            return b if a is None else a if b is None else min(a, b)

        per_tool = dict(self.max_tool_calls_per_tool)
        for name, n in other.max_tool_calls_per_tool.items():
            per_tool[name] = low(per_tool.get(name), n)
        return Budget(
            max_tool_calls=low(self.max_tool_calls, other.max_tool_calls),
            max_tool_calls_per_tool=per_tool,
            max_cost=low(self.max_cost, other.max_cost),
            max_latency=low(self.max_latency, other.max_latency),
            warn_at=low(self.warn_at, other.warn_at),
        )

    @property
    def unlimited(self) -> bool:
        """True when no limit is set (``warn_at`` alone is not a limit)."""
        return (
            self.max_tool_calls is None
            and not self.max_tool_calls_per_tool
            and self.max_cost is None
            and self.max_latency is None
        )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One tool call of a plan. ``arguments`` is the JSON object as written, references included.

    ``depends_on`` steps must succeed before this one starts (if one does not, this one is skipped);
    ``after`` steps must only have ended, whatever their outcome: an ordering without a condition.
    ``when`` is a condition as written (a reference, an expression ``{"$op": ..., "args": [...]}`` or
    a boolean): if it is false when the step is about to run, the step ends ``skipped``.

    A step with alternatives (``"tool": {"one_of": [...]}``) has them in ``one_of``, in the order
    written, and ``tool`` is their group's name (the names sorted, joined by ``|``); which one
    runs is chosen when the step is dispatched.
    """

    kind: Literal["step"] = "step"
    id: str
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    depends_on: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    timeout: float | None = None
    retry: int | None = None
    fallback: Fallback | None = None
    rationale: str | None = None
    expected_outcome: str | None = None
    one_of: tuple[str, ...] = ()
    when: Any = None


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A parsed plan, whatever dialect it was written in.

    ``output_steps`` empty means every step is an output.
    """

    kind: Literal["plan"] = "plan"
    steps: tuple[Step, ...]
    output_steps: tuple[str, ...] = ()
    goal: str | None = None
    budget: Budget | None = None
    policy: str | None = None
    max_concurrency: int | None = None
    failure_mode: FailureMode = "fail_forward"
    dialect: Dialect = "native"
    missing_field: MissingField = "null"
    # False: steps with the same call of a read_only and idempotent tool each make their own call.
    share_calls: bool = True

    @property
    def step_ids(self) -> tuple[str, ...]:
        """Step ids in plan order."""
        return tuple(s.id for s in self.steps)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The ids whose values go back to the model (all steps when ``output_steps`` is empty)."""
        return self.output_steps or self.step_ids

    def step(self, step_id: str) -> Step:
        """The step with id ``step_id`` (KeyError if absent)."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def to_dict(self) -> dict[str, Any]:
        """The plan in the native dialect, as JSON data."""
        steps: list[dict[str, Any]] = []
        for s in self.steps:
            d: dict[str, Any] = {
                "id": s.id,
                "tool": {"one_of": list(s.one_of)} if s.one_of else s.tool,
                "arguments": dict(s.arguments),
            }
            if s.depends_on:
                d["depends_on"] = list(s.depends_on)
            if s.after:
                d["after"] = list(s.after)
            for name in ("when", "timeout", "retry", "rationale", "expected_outcome"):
                value = getattr(s, name)
                if value is not None:
                    d[name] = value
            if s.fallback is not None:
                d["fallback"] = s.fallback.to_dict()
            steps.append(d)
        out: dict[str, Any] = {"steps": steps}
        if self.output_steps:
            out["output_steps"] = list(self.output_steps)
        if self.goal is not None:
            out["goal"] = self.goal
        if self.max_concurrency is not None:
            out["max_concurrency"] = self.max_concurrency
        if self.failure_mode != "fail_forward":
            out["failure_mode"] = self.failure_mode
        if not self.share_calls:
            out["share_calls"] = False
        return out

    def to_json(self) -> str:
        """`to_dict` as compact JSON text."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)
