"""Traces: the calls a run made, in the order they started, with the choices among alternatives.

A trace comes from a `PlanResult`, several (an agent run's plans and direct calls: an
`AgentResult`), or a stored run (its `PlanResult` and its stored events, which hold the
``tool_chosen`` rows).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..execute import Choice, PlanResult

__all__ = ("Trace", "TracedCall", "trace_of")


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedCall:
    """One step of a run as it went.

    Attributes:
        run_id: The run it belongs to.
        step_id: Its step id.
        tool: The tool that ran (for a step with alternatives: the member chosen).
        status: How it ended (``succeeded``, ``failed``, ``skipped``, ``not_run``...).
        attempts: Calls it made (retries and fallback included; 0 when it never ran).
        started_at: When it started (Unix seconds), if it did.
        ended_at: When it ended.
        used_fallback: Its fallback's result stands in for it.
        group: The group it was chosen from, when it had alternatives.
        error: Its error message, if it did not succeed.
    """

    run_id: str
    step_id: str
    tool: str
    status: str
    attempts: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    used_fallback: bool = False
    group: str | None = None
    error: str | None = None

    @property
    def ran(self) -> bool:
        """True when the step called a tool."""
        return self.attempts > 0 or self.status in ("succeeded", "failed", "timed_out", "unknown_outcome")

    @property
    def names(self) -> tuple[str, ...]:
        """The names a declaration may call it by: its tool, and its group."""
        return (self.tool, self.group) if self.group else (self.tool,)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """What ran: calls in the order they started (steps that never ran last), and the choices made.

    Attributes:
        calls: Every step.
        choices: Every choice among alternatives, in order.
        started_at: When the first run started.
        ended_at: When the last one ended.
    """

    calls: tuple[TracedCall, ...]
    choices: tuple[Choice, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def ran(self) -> tuple[TracedCall, ...]:
        """The calls that called a tool, in the order they started."""
        return tuple(c for c in self.calls if c.ran)

    @property
    def duration(self) -> float | None:
        """Seconds from the first start to the last end."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def choice_for(self, call: TracedCall) -> Choice | None:
        """The choice made for ``call``'s step, if it had alternatives."""
        for choice in self.choices:
            if choice.step_id == call.step_id and call.group == choice.group:
                return choice
        return None


def _calls(result: PlanResult, choices: Sequence[Choice]) -> list[TracedCall]:
    groups = {c.step_id: c.group for c in choices}
    return [
        TracedCall(
            run_id=result.run_id,
            step_id=r.id,
            tool=r.tool,
            status=r.status,
            attempts=r.attempts,
            started_at=r.started_at,
            ended_at=r.ended_at,
            used_fallback=r.used_fallback,
            group=groups.get(r.id),
            error=r.error.message if r.error is not None else None,
        )
        for r in result.steps.values()
    ]


def trace_of(source: Any, *, events: Iterable[Any] = ()) -> Trace:
    """The trace of a `PlanResult`, a list of them, or an agent run's result (its plans and direct calls).

    Args:
        source: A `PlanResult`, a sequence of them, or an object with ``plan_results`` (and
            ``call_results``), such as `toolplan.agent.AgentResult`.
        events: A stored run's events (`toolplan.store.Store.events`): their ``tool_chosen``
            rows give the choices a stored `PlanResult` does not carry.
    """
    if isinstance(source, PlanResult):
        results: list[PlanResult] = [source]
    elif hasattr(source, "plan_results"):
        results = [*getattr(source, "call_results", ()), *source.plan_results]
    else:
        results = list(source)
    stored = [Choice.from_dict(e.payload) for e in events if getattr(e, "type", None) == "tool_chosen"]
    calls: list[TracedCall] = []
    choices: list[Choice] = []
    for result in results:
        own = list(result.choices) or [c for c in stored if c.step_id in result.steps]
        choices.extend(own)
        calls.extend(_calls(result, own))
    order = {id(c): i for i, c in enumerate(calls)}
    calls.sort(key=lambda c: (c.started_at if c.ran and c.started_at is not None else math.inf, order[id(c)]))
    starts = [c.started_at for c in calls if c.started_at is not None]
    ends = [c.ended_at for c in calls if c.ended_at is not None]
    return Trace(
        calls=tuple(calls),
        choices=tuple(choices),
        started_at=min(starts) if starts else None,
        ended_at=max(ends) if ends else None,
    )
