"""Approval ahead of time: the steps that will need a person's answer once their inputs are computed.

A request lists them after the steps that wait now (`PendingStep.ready` False), with their arguments
as far as resolved, so that a person can answer the whole plan at once ("approve the plan"). An
answer given for such a step is kept by the run's gate and applied when the step becomes ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..plan._internal import resolve_compiled
from ._approval import PendingStep

if TYPE_CHECKING:
    from ..plan import CompiledStep
    from ._gate import ApprovalGate
    from ._run import PlanRun

__all__ = ("ahead_of_time", "partial_arguments")


def partial_arguments(run: PlanRun, cs: CompiledStep) -> dict[str, Any]:
    """``cs``'s arguments as far as they can be resolved now.

    An argument whose references are not all computed yet stays as the plan wrote it.
    """
    written = cs.step.arguments
    compiled = cs.arguments
    try:
        resolved = resolve_compiled(compiled, run.outputs, True, None)
    except Exception:  # some reference is not computed yet: argument by argument
        resolved = None
    if isinstance(resolved, Mapping):
        return dict(resolved)
    out: dict[str, Any] = {}
    for key, value in written.items():
        try:
            out[key] = resolve_compiled(_one(compiled, key), run.outputs, True, None)[key]
        except Exception:  # not computed yet (or a step that failed): as written
            out[key] = value
    return out


def _one(compiled: Any, key: str) -> Any:
    """The compiled node of one top-level argument (the node of a dict is (DICT, k1, v1, k2, v2...))."""
    if type(compiled) is tuple:
        for i in range(1, len(compiled) - 1, 2):
            if compiled[i] == key:
                return (compiled[0], key, compiled[i + 1])
    raise KeyError(key)


def ahead_of_time(gate: ApprovalGate, run: PlanRun, listed: set[str]) -> list[PendingStep]:
    """The run's steps not started yet that its rule marks (arguments as written), in plan order.

    ``listed``: steps already in the request; steps answered ahead of time are left out (they are
    in the request's ``answered``). A rule function that raises for a step leaves it out here (it
    fails the step when the step is ready).
    """
    out: list[PendingStep] = []
    rule, tools = gate.rule, gate.tools
    now = run.now()
    for sid, cs in run.steps.items():
        if sid in listed or sid in run.results or sid in run.tasks or sid in gate.answers:
            continue
        try:
            if not rule.needs_approval(cs.step, tools):
                continue
        except Exception:
            continue
        pending = gate.pending_of(run, cs, partial_arguments(run, cs))
        out.append(replace(pending, requested_at=now, expires_at=None, ready=False))
    return out
