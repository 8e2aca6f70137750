"""Plan shapes as plain DAGs, and their translation to toolplan plans.

A DAG is an ordered mapping ``step id -> dependency ids``, listed in a topological order, so every
contender gets exactly the same graph.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Dag = dict[str, tuple[str, ...]]
Shape = Literal["chain", "fanout", "random"]
SHAPES: tuple[Shape, ...] = ("chain", "fanout", "random")
MAX_IN_DEGREE = 3


def sid(i: int) -> str:
    return f"s{i}"


def chain(n: int) -> Dag:
    """s0 -> s1 -> ... -> s(n-1)."""
    return {sid(i): ((sid(i - 1),) if i else ()) for i in range(n)}


def fanout(n: int) -> Dag:
    """One root, n-2 parallel middle steps that each read the root, one sink that reads them all."""
    if n < 3:
        return chain(n)
    dag: Dag = {sid(0): ()}
    for i in range(1, n - 1):
        dag[sid(i)] = (sid(0),)
    dag[sid(n - 1)] = tuple(sid(i) for i in range(1, n - 1))
    return dag


def random_dag(n: int, *, seed: int = 0, max_in_degree: int = MAX_IN_DEGREE) -> Dag:
    """A seeded random DAG: step i reads 0..max_in_degree distinct earlier steps.

    Parents are drawn from a window of the previous ``max(8, sqrt(n) * 2)`` steps, so the depth grows
    with n (about n / window * a few) instead of staying logarithmic, like real multi-stage plans.
    """
    rng = random.Random(seed)
    window = max(8, int(math.sqrt(n) * 2))
    dag: Dag = {}
    for i in range(n):
        lo = max(0, i - window)
        k = rng.randint(0, min(max_in_degree, i - lo)) if i else 0
        if i and k == 0 and rng.random() < 0.7:
            k = 1  # keep most steps connected
        parents = sorted(rng.sample(range(lo, i), k)) if k else []
        dag[sid(i)] = tuple(sid(p) for p in parents)
    return dag


def make(shape: Shape, n: int, *, seed: int = 0) -> Dag:
    if shape == "chain":
        return chain(n)
    if shape == "fanout":
        return fanout(n)
    return random_dag(n, seed=seed)


def sinks(dag: Mapping[str, Sequence[str]]) -> list[str]:
    used = {d for deps in dag.values() for d in deps}
    return [s for s in dag if s not in used]


def levels(dag: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Kahn levels: level(s) = 1 + max level of its dependencies."""
    level: dict[str, int] = {}
    out: list[list[str]] = []
    for s, deps in dag.items():  # dag is in topological order
        lv = 1 + max((level[d] for d in deps), default=-1)
        level[s] = lv
        if lv == len(out):
            out.append([])
        out[lv].append(s)
    return out


def depth(dag: Mapping[str, Sequence[str]]) -> int:
    return len(levels(dag))


def critical_path(dag: Mapping[str, Sequence[str]], durations: Mapping[str, float]) -> float:
    """Longest path through the DAG weighted by each step's duration (seconds)."""
    finish: dict[str, float] = {}
    for s, deps in dag.items():
        finish[s] = durations[s] + max((finish[d] for d in deps), default=0.0)
    return max(finish.values(), default=0.0)


def to_plan(
    dag: Mapping[str, Sequence[str]],
    *,
    tool: str | Mapping[str, str] = "noop",
    extra: Mapping[str, Mapping[str, Any]] | None = None,
    outputs: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The native-dialect plan: each step calls ``tool`` with ``deps=[$ref:...]`` for data flow."""
    steps: list[dict[str, Any]] = []
    for s, deps in dag.items():
        args: dict[str, Any] = {"deps": [f"$ref:{d}" for d in deps]}
        if extra is not None and s in extra:
            args.update(extra[s])
        name = tool if isinstance(tool, str) else tool[s]
        steps.append({"id": s, "tool": name, "arguments": args})
    return {"steps": steps, "output_steps": list(outputs if outputs is not None else sinks(dag))}
