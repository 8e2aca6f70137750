"""Replanning: a chain of declarations, each in force from when it was declared until the next.

A declaration names the plan it replaces (``replaces``: that plan's ``planId``). `plan_chain`
follows those links back from the last declaration; `audit_chain` judges each call against the
declaration in force when the call started, and `execution_state` says where a declaration stands
(``Planned``, ``InProgress``, ``Complete``, ``Failed``) given what ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..tools import ToolsLike
from ._audit import Finding, _match, audit
from ._declared import Declaration
from ._state import ExecutionState
from ._trace import Trace, TracedCall

__all__ = ("audit_chain", "chain_traces", "execution_state", "plan_chain")

_ENDED = frozenset(
    {"succeeded", "failed", "timed_out", "cancelled", "skipped", "not_run", "unknown_outcome", "rejected"}
)


def plan_chain(declarations: Sequence[Declaration]) -> tuple[Declaration, ...]:
    """The last declaration and the ones it replaces, oldest first (``replaces`` links, by ``planId``).

    A last declaration that replaces nothing is a chain of one; declarations outside the chain are
    left out (they were neither in force at the end nor replaced by one that was).
    """
    if not declarations:
        return ()
    by_id = {d.plan_id: d for d in declarations if d.plan_id is not None}
    chain = [declarations[-1]]
    while chain[-1].replaces is not None:
        before = by_id.get(chain[-1].replaces)
        if before is None or any(before is d for d in chain):
            break
        chain.append(before)
    return tuple(reversed(chain))


def chain_traces(chain: Sequence[Declaration], trace: Trace) -> list[Trace]:
    """``trace`` split by the declaration in force when each call started (one trace per declaration).

    A call that started before the second declaration counts under the first; a call that never
    started, under the last. Without the time of every declaration the last gets every call.
    """
    if len(chain) <= 1 or any(d.declared_at is None for d in chain):
        return [Trace(calls=(), choices=()) for _ in chain[:-1]] + [trace]
    starts = [d.declared_at or 0.0 for d in chain[1:]]
    parts: list[list[TracedCall]] = [[] for _ in chain]
    for call in trace.calls:
        at = call.started_at if call.ran and call.started_at is not None else math.inf
        parts[sum(1 for t in starts if at >= t)].append(call)
    out: list[Trace] = []
    for calls in parts:
        steps = {(c.step_id) for c in calls}
        begun = [c.started_at for c in calls if c.started_at is not None]
        ended = [c.ended_at for c in calls if c.ended_at is not None]
        out.append(
            Trace(
                calls=tuple(calls),
                choices=tuple(c for c in trace.choices if c.step_id in steps),
                started_at=min(begun) if begun else None,
                ended_at=max(ended) if ended else None,
            )
        )
    return out


def audit_chain(declarations: Sequence[Declaration], trace: Trace, *, tools: ToolsLike | None = None) -> list[Finding]:
    """`audit` of a replanned run: each call judged against the declaration in force when it was made.

    The chain is `plan_chain` of ``declarations``. Each declaration's budget counts the calls made
    while it was in force. The calls a replaced declaration intended but that were not made before
    it was replaced were withdrawn by the replan: they are not ``missing_call`` findings. With one
    declaration (or none) this is `audit` of the last one.
    """
    chain = plan_chain(declarations)
    if len(chain) <= 1:
        return audit(chain[0] if chain else Declaration(), trace, tools=tools)
    findings: list[Finding] = []
    parts = chain_traces(chain, trace)
    for n, (declaration, part) in enumerate(zip(chain, parts, strict=True)):
        found = audit(declaration, part, tools=tools)
        if n < len(chain) - 1:
            found = [f for f in found if f.code != "missing_call"]
        findings.extend(found)
    return findings


def execution_state(declaration: Declaration, trace: Trace) -> ExecutionState:
    """Where ``declaration`` stands given what ran (``trace``, which may be of a run still going).

    ``Complete`` when every declared call succeeded (itself, through its step's fallback, or through
    a declared fallback call); ``Failed`` as soon as one ended otherwise (the reason names it);
    ``InProgress`` with the number completed once one has started; ``Planned`` before.
    """
    if not declaration.calls:
        return declaration.execution_state
    matched, taken = _match(declaration, trace)
    rescued = {
        mark.split(":", 1)[0]
        for i, mark in taken.items()
        if ":fallback" in mark and trace.calls[i].status == "succeeded"
    }
    completed = 0
    started = False
    for d in declaration.calls:
        call = matched.get(d.id)
        if call is None:
            continue
        started = started or call.ran or call.status in _ENDED
        if call.status == "succeeded" or d.id in rescued:
            completed += 1
        elif call.status in _ENDED:
            why = f": {call.error}" if call.error else ""
            return ExecutionState(
                state="Failed",
                completed=completed,
                reason=f"declared call {d.id} ({d.tool!r}, step {call.step_id!r}) ended {call.status}{why}",
            )
    if completed == len(declaration.calls):
        return ExecutionState(state="Complete", completed=completed)
    if started:
        return ExecutionState(state="InProgress", completed=completed)
    return ExecutionState(state="Planned")
