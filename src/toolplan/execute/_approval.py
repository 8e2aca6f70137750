"""Human approval of a plan's side effects: the rule that says which steps need it, the request, the answers.

A run given an `ApprovalRule` asks before calling a step the rule marks (its arguments resolved):
the step waits, the other steps go on. The answers (`Approval`) approve it, approve it with edited
arguments (checked against the tool's schema like any arguments), or reject it with a reason. How a
waiting step is asked and answered inside a run is in `_gate.py`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import UserError
from .._json import json_safe, too_deep

if TYPE_CHECKING:
    from ..plan import Step
    from ..tools import ToolDefinition, ToolRegistry

__all__ = (
    "Approval",
    "ApprovalCallback",
    "ApprovalRequest",
    "ApprovalRule",
    "PendingStep",
    "edit_problems",
)

#: A user's test of one step: (the step, the definition of a tool it may call, its arguments) -> needs approval.
ApprovalTest = Callable[["Step", "ToolDefinition", Mapping[str, Any]], bool]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRule:
    """Which steps of a run need a person's approval before their tool is called.

    A step needs approval when any of the criteria set holds for its tool, for a tool it may choose
    among (alternatives) or for its fallback's tool. Set at least one.

    Attributes:
        every: Every step.
        destructive: Steps whose tool is marked ``destructive``.
        not_read_only: Steps whose tool is not marked ``read_only`` (every side effect).
        tools: Steps that call one of these tools, by name.
        cost_above: Steps whose call costs more than this (the tool's ``cost``, or its ``cost_of`` of
            the resolved arguments).
        when: A function of ``(step, tool definition, arguments)`` that returns True when the step
            needs approval. An exception it raises fails the step (error kind ``approval``).
        timeout: Seconds a step may wait for its answer; then it ends ``rejected`` with the reason
            "approval timed out". None waits without limit.
    """

    every: bool = False
    destructive: bool = False
    not_read_only: bool = False
    tools: frozenset[str] = frozenset()
    cost_above: float | None = None
    when: ApprovalTest | None = field(default=None, compare=False)
    timeout: float | None = None

    def __post_init__(self) -> None:
        tools: object = self.tools  # (any value, from untyped callers)
        if isinstance(tools, str) or not isinstance(tools, Iterable) or not all(isinstance(t, str) for t in tools):
            raise UserError(f"ApprovalRule tools must be a set of tool names, got {tools!r}.")
        object.__setattr__(self, "tools", frozenset(tools))
        if self.cost_above is not None and not (isinstance(self.cost_above, int | float) and self.cost_above >= 0):
            raise UserError(f"ApprovalRule cost_above must be a number >= 0, got {self.cost_above!r}.")
        if self.timeout is not None and not (
            isinstance(self.timeout, int | float) and math.isfinite(self.timeout) and self.timeout > 0
        ):
            raise UserError(f"ApprovalRule timeout must be a positive number of seconds, got {self.timeout!r}.")
        if self.when is not None and not callable(self.when):
            raise UserError(f"ApprovalRule when must be a function of (step, tool, arguments), got {self.when!r}.")
        if not (self.every or self.destructive or self.not_read_only or self.tools) and (
            self.cost_above is None and self.when is None
        ):
            raise UserError(
                "ApprovalRule() marks no step: set every=True, destructive=True, not_read_only=True, tools={...}, "
                "cost_above=... or when=... (or pass no rule for runs without approval)."
            )

    def to_dict(self) -> dict[str, Any] | None:
        """The rule as JSON data (`from_dict` reads it back), or None for a rule with a ``when`` function."""
        if self.when is not None:
            return None
        return {
            "every": self.every,
            "destructive": self.destructive,
            "not_read_only": self.not_read_only,
            "tools": sorted(self.tools),
            "cost_above": self.cost_above,
            "timeout": self.timeout,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRule:
        """The rule `to_dict` wrote.

        Raises:
            UserError: the data does not make a rule.
        """
        return cls(
            every=bool(data.get("every")),
            destructive=bool(data.get("destructive")),
            not_read_only=bool(data.get("not_read_only")),
            tools=frozenset(data.get("tools") or ()),
            cost_above=data.get("cost_above"),
            timeout=data.get("timeout"),
        )

    def needs_approval(self, step: Step, tools: ToolRegistry, arguments: Mapping[str, Any] | None = None) -> bool:
        """True when ``step`` needs approval before its tool is called.

        ``arguments`` are the step's resolved arguments; None (a dry run, before anything ran) uses
        the step's arguments as written, and ``cost_above`` then uses each tool's ``cost``.
        """
        if self.every:
            return True
        args = step.arguments if arguments is None else arguments
        return any(self._marks(step, d, args, arguments is not None) for d in _definitions(step, tools))

    def _marks(self, step: Step, tool: ToolDefinition, arguments: Mapping[str, Any], resolved: bool) -> bool:
        a = tool.annotations
        if (self.destructive and a.destructive) or (self.not_read_only and not a.read_only) or tool.name in self.tools:
            return True
        if self.cost_above is not None:
            cost = a.cost
            if resolved and a.cost_of is not None:
                try:
                    cost = float(a.cost_of(arguments))
                except Exception:  # the call fails at dispatch with its own error; ask anyway
                    return True
            if not cost <= self.cost_above:  # (NaN asks too)
                return True
        return self.when is not None and bool(self.when(step, tool, arguments))


def _definitions(step: Step, tools: ToolRegistry) -> list[ToolDefinition]:
    """The definitions of the tools ``step`` may call: its tool (a group's members), its fallback's."""
    names = [step.tool, *step.one_of]
    group = tools.group(step.tool)
    if group is not None:
        names.extend(group.members)
    if step.fallback is not None:
        names.append(step.fallback.tool)
        fb_group = tools.group(step.fallback.tool)
        if fb_group is not None:
            names.extend(fb_group.members)
    found = (tools.get(n) for n in dict.fromkeys(names))
    return [d for d in found if d is not None]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingStep:
    """A step that waits for approval, as a person is shown it.

    Attributes:
        step_id: The step's id.
        tool: The tool it calls (a group's name for a step with alternatives).
        arguments: Its arguments, references resolved.
        annotations: Its tool's ``read_only``, ``idempotent``, ``destructive`` and ``cost``.
        rationale: Why the plan calls it, if the plan said.
        dependents: The steps that depend on it, transitively (they are skipped if it is rejected).
        fallback: The tool of its fallback, if it has one.
        requested_at: When it began to wait (epoch seconds).
        expires_at: When it ends ``rejected`` unanswered (epoch seconds), or None.
        ready: False for a step listed ahead of time: it will need approval but its inputs are still
            being computed (it waits on other steps). Its ``arguments`` are as far as resolved (a
            reference not computed yet stays as written) and it has no ``expires_at`` yet. It may be
            answered now: the answer is kept and applied when the step becomes ready.
    """

    step_id: str
    tool: str
    arguments: Mapping[str, Any]
    annotations: Mapping[str, Any] = field(default_factory=dict[str, Any])
    rationale: str | None = None
    dependents: tuple[str, ...] = ()
    fallback: str | None = None
    requested_at: float = 0.0
    expires_at: float | None = None
    ready: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data; `from_dict` reads it back."""
        return {
            "step_id": self.step_id,
            "ready": self.ready,
            "tool": self.tool,
            "arguments": json_safe(dict(self.arguments)),
            "annotations": dict(self.annotations),
            "rationale": self.rationale,
            "dependents": list(self.dependents),
            "fallback": self.fallback,
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingStep:
        """The pending step `to_dict` wrote."""
        return cls(
            step_id=data["step_id"],
            tool=data["tool"],
            arguments=dict(data.get("arguments") or {}),
            annotations=dict(data.get("annotations") or {}),
            rationale=data.get("rationale"),
            dependents=tuple(data.get("dependents") or ()),
            fallback=data.get("fallback"),
            requested_at=float(data.get("requested_at") or 0.0),
            expires_at=data.get("expires_at"),
            ready=bool(data.get("ready", True)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """The steps of a run that wait for a person's answer (one request may hold several).

    Attributes:
        run_id: The run's id.
        steps: The waiting steps, in plan order: those ready to run once answered, then (``ready``
            False) those that will need approval once their inputs are computed, so that the whole
            plan can be answered at once.
        problems: Step id -> why an answer given for it was refused (an edit that does not fit the
            tool's schema); the step still waits.
        rule: The run's `ApprovalRule` as JSON data (`ApprovalRule.to_dict`), so that a stored run
            can be resumed with it; None for a rule with a ``when`` function.
        answered: Answers given ahead of time for steps not ready yet, by step id: each is applied
            when its step becomes ready (a resume keeps them).
    """

    run_id: str
    steps: tuple[PendingStep, ...]
    problems: Mapping[str, str] = field(default_factory=dict[str, str])
    rule: Mapping[str, Any] | None = None
    answered: Mapping[str, Approval] = field(default_factory=dict[str, "Approval"])

    @property
    def step_ids(self) -> tuple[str, ...]:
        """The ids of the steps listed, ready or not."""
        return tuple(p.step_id for p in self.steps)

    @property
    def ready(self) -> tuple[PendingStep, ...]:
        """The steps that wait now (their inputs computed)."""
        return tuple(p for p in self.steps if p.ready)

    @property
    def ahead(self) -> tuple[PendingStep, ...]:
        """The steps listed ahead of time (``ready`` False)."""
        return tuple(p for p in self.steps if not p.ready)

    def approve_all(self) -> dict[str, Approval]:
        """An approval of every step listed, ready or not ("approve the plan")."""
        return {p.step_id: Approval() for p in self.steps}

    def reject_all(self, reason: str) -> dict[str, Approval]:
        """A rejection of every step listed, with ``reason``."""
        return {p.step_id: Approval.reject(reason) for p in self.steps}

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data; `from_dict` reads it back."""
        return {
            "run_id": self.run_id,
            "steps": [p.to_dict() for p in self.steps],
            "problems": dict(self.problems),
            "rule": None if self.rule is None else dict(self.rule),
            "answered": {sid: a.to_dict() for sid, a in self.answered.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRequest:
        """The request `to_dict` wrote."""
        return cls(
            run_id=data.get("run_id") or "",
            steps=tuple(PendingStep.from_dict(p) for p in data.get("steps") or ()),
            problems=dict(data.get("problems") or {}),
            rule=data.get("rule"),
            answered={sid: Approval.from_dict(a) for sid, a in (data.get("answered") or {}).items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A person's answer for one waiting step.

    ``Approval()`` approves; ``Approval(arguments={...})`` approves with edited arguments (they
    replace the step's and are checked against its tool's schema); ``Approval.reject(reason)``
    rejects: the step ends ``rejected`` with the reason and its dependents are skipped.
    """

    approved: bool = True
    arguments: Mapping[str, Any] | None = None
    reason: str | None = None

    @classmethod
    def approve(cls, arguments: Mapping[str, Any] | None = None) -> Approval:
        """Approve, with ``arguments`` in place of the step's if given."""
        return cls(arguments=arguments)

    @classmethod
    def reject(cls, reason: str = "rejected by the approver") -> Approval:
        """Reject with ``reason`` (the model is told it)."""
        return cls(approved=False, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        """``{"approved", "arguments", "reason"}``."""
        args = None if self.arguments is None else json_safe(dict(self.arguments))
        return {"approved": self.approved, "arguments": args, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Approval:
        """The answer `to_dict` wrote."""
        approved = bool(data.get("approved", True))
        return cls(approved=approved, arguments=data.get("arguments"), reason=data.get("reason"))


#: Asked with the steps waiting at one moment; returns an answer per step id. A step it leaves
#: unanswered keeps waiting: the run returns a result that waits for approval (`PlanResult.approval`).
ApprovalCallback = Callable[[ApprovalRequest], Awaitable[Mapping[str, Approval]]]

_MAX_REASON = 2000


def edit_problems(tools: ToolRegistry, tool: str, answer: object) -> str | None:
    """Why ``answer`` cannot be used for a step of ``tool`` (its edited arguments, its reason), or None."""
    if not isinstance(answer, Approval):
        return f"an answer must be an Approval, got {type(answer).__name__}"
    if answer.reason is not None and (not isinstance(answer.reason, str) or len(answer.reason) > _MAX_REASON):
        return f"a rejection's reason must be text of at most {_MAX_REASON} characters"
    edited: object = answer.arguments
    if edited is None or not answer.approved:
        return None
    if not isinstance(edited, Mapping):
        return f"edited arguments must be a JSON object, got {type(edited).__name__}"
    if too_deep(edited):
        return "edited arguments are nested too deeply"
    problems = tools.argument_problems(tool, edited)
    if problems:
        return f"edited arguments do not fit tool {tool!r}: {'; '.join(problems)}"
    return None
