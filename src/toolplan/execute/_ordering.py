"""Ordering helpers of the scheduler: which resource a step works on, and the plan order of a plan's steps."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..plan import CompiledStep
    from ..tools import ToolAnnotations

__all__ = ("plan_order", "resource_of")


def resource_of(
    alternatives: tuple[tuple[str, ...], str | None], annotations: Callable[[str], ToolAnnotations]
) -> str | None:
    """The one resource a group's members name, if any.

    Members that name different resources leave the step off every chain: which member runs is
    chosen when the step starts, too late to place it.
    """
    named = {r for r in (annotations(m).resource for m in alternatives[0]) if r is not None}
    return named.pop() if len(named) == 1 else None


def plan_order(
    ids: list[str], steps: Mapping[str, CompiledStep], order: Mapping[str, int], after: Mapping[str, Sequence[str]]
) -> list[int]:
    """The steps in the topological order closest to the plan's: the first ready step in plan order each time.

    That is the plan's own order when no step waits for a later one.
    """
    waiting = [0] * len(ids)
    then: list[list[int]] = [[] for _ in ids]  # step -> the steps that wait for it
    for i, (sid, cs) in enumerate(steps.items()):
        for d in (*cs.deps, *after[sid]) if sid in after else cs.deps:
            j = order[d]
            waiting[i] += 1
            then[j].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for child in then[i]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    return out
