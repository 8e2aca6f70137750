"""Pure graph utilities over ``{step_id: dependency ids}`` mappings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ("critical_path", "find_cycles", "mermaid", "topological_order", "waves")

Deps = Mapping[str, Sequence[str]]


def find_cycles(deps: Deps) -> list[list[str]]:
    """Every distinct cycle found by a depth-first search, each as ``[a, b, ..., a]``.

    Edges to unknown ids are ignored (they are reported elsewhere). Self-loops are included.
    """
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for root in deps:
        if color[root] != white:
            continue
        color[root] = grey
        stack: list[tuple[str, int]] = [(root, 0)]
        path = [root]
        while stack:
            node, i = stack[-1]
            children = deps[node]
            if i < len(children):
                stack[-1] = (node, i + 1)
                child = children[i]
                c = color.get(child)
                if c is None or c == black:
                    continue
                if c == grey:
                    cycle = [*path[path.index(child) :], child]
                    key = frozenset(cycle)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(cycle)
                    continue
                color[child] = grey
                stack.append((child, 0))
                path.append(child)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return cycles


def waves(deps: Deps, order: Sequence[str] | None = None) -> list[list[str]]:
    """Kahn levels: wave k holds the steps whose longest dependency chain has k steps.

    Steps in a cycle (or behind one) are left out. Order inside a wave follows ``deps``' order.
    Pass ``order`` (a `topological_order` of ``deps``) to avoid computing it again.
    """
    level: dict[str, int] = {}
    for step in topological_order(deps) if order is None else order:
        level[step] = max((level[d] + 1 for d in deps[step] if d in level), default=0)
    out: list[list[str]] = []
    for step in deps:  # deps' order, so each wave keeps the plan's order
        lv = level.get(step)
        if lv is None:
            continue
        while len(out) <= lv:
            out.append([])
        out[lv].append(step)
    return out


def topological_order(deps: Deps) -> list[str]:
    """A topological order (stable: ties keep ``deps``' order); cyclic steps are left out."""
    indegree = dict.fromkeys(deps, 0)
    dependents: dict[str, list[str]] = {s: [] for s in deps}
    for s, ds in deps.items():
        for d in ds:
            if d in dependents:
                dependents[d].append(s)
                indegree[s] += 1
    ready = [s for s, n in indegree.items() if n == 0]
    order: list[str] = []
    i = 0
    while i < len(ready):
        s = ready[i]
        i += 1
        order.append(s)
        for t in dependents[s]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    return order


def critical_path(
    deps: Deps, durations: Mapping[str, float] | None = None, order: Sequence[str] | None = None
) -> tuple[list[str], float]:
    """The heaviest dependency chain and its total weight (unit weights without ``durations``)."""
    best: dict[str, tuple[float, str | None]] = {}
    for step in topological_order(deps) if order is None else order:
        w = 1.0 if durations is None else durations.get(step, 0.0)
        prev = max(((best[d][0], d) for d in deps[step] if d in best), default=(0.0, None))
        best[step] = (prev[0] + w, prev[1])
    if not best:
        return [], 0.0
    end = max(best, key=lambda s: best[s][0])
    total = best[end][0]
    chain: list[str] = []
    cur: str | None = end
    while cur is not None:
        chain.append(cur)
        cur = best[cur][1]
    return chain[::-1], total


def mermaid(deps: Deps, labels: Mapping[str, str] | None = None) -> str:
    """Mermaid flowchart text of the DAG, one subgraph per wave."""
    lines = ["flowchart TD"]
    node_ids = {s: f"n{i}" for i, s in enumerate(deps)}
    for k, wave in enumerate(waves(deps)):
        lines.append(f'  subgraph wave{k}["wave {k + 1}"]')
        for s in wave:
            label = (labels or {}).get(s, s).replace('"', "'")
            lines.append(f'    {node_ids[s]}["{label}"]')
        lines.append("  end")
    for s, ds in deps.items():
        for d in ds:
            if d in node_ids:
                lines.append(f"  {node_ids[d]} --> {node_ids[s]}")
    return "\n".join(lines) + "\n"
