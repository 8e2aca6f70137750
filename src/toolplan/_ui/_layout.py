"""A layered drawing of a plan's DAG, left to right, for the pictures of ``toolplan graph``.

The classic recipe (Sugiyama): a step's column is its wave (its longest chain of dependencies);
an edge that skips columns gets a waypoint in each column it crosses; barycentre sweeps order each
column to cut crossings (the best order seen is kept); each step then moves towards the mean height
of its neighbours. Pure and deterministic, so the same plan gives the same picture, byte for byte.
The live page lays out with dagre (same direction, same idea) in the browser.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..plan import waves

__all__ = ("Box", "Layout", "layout")

_WAY = "\x00"  # waypoint ids start with it (step ids never do)


@dataclass(frozen=True, slots=True, kw_only=True)
class Box:
    """A step's rectangle (top-left corner, size)."""

    x: float
    y: float
    w: float
    h: float

    @property
    def left(self) -> tuple[float, float]:
        return self.x, self.y + self.h / 2

    @property
    def right(self) -> tuple[float, float]:
        return self.x + self.w, self.y + self.h / 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Where each step goes, and each edge's points from the dependency to the dependent."""

    width: float
    height: float
    boxes: Mapping[str, Box]
    edges: Sequence[tuple[str, str, Sequence[tuple[float, float]]]]


def layout(
    deps: Mapping[str, Sequence[str]],
    widths: Mapping[str, float],
    *,
    node_h: float = 46,
    rank_gap: float = 56,
    node_gap: float = 18,
    margin: float = 12,
    top: float = 0,
) -> Layout:
    """Lay out the DAG ``deps`` (step → its dependencies) with each step ``widths[step]`` wide.

    ``top`` leaves room above the drawing (for a caption).
    """
    level = {s: k for k, wave in enumerate(waves(deps)) for s in wave}
    columns: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for s in deps:  # plan order inside a column
        if s in level:
            columns[level[s]].append(s)
    up: dict[str, list[str]] = {s: [] for s in level}  # neighbours in the column to the left
    down: dict[str, list[str]] = {s: [] for s in level}
    chains: list[tuple[str, str, list[str]]] = []
    for s, ds in deps.items():
        for d in ds:
            if d not in level or s not in level:
                continue
            chain = [d]
            for k in range(level[d] + 1, level[s]):
                way = f"{_WAY}{d}>{s}#{k}"
                columns[k].append(way)
                up[way], down[way] = [], []
                chain.append(way)
            chain.append(s)
            for a, b in itertools.pairwise(chain):
                down[a].append(b)
                up[b].append(a)
            chains.append((d, s, chain))

    _order(columns, up, down)

    def height(n: str) -> float:
        return 6.0 if n.startswith(_WAY) else node_h

    # Columns' x: each as wide as its widest step.
    col_x: list[float] = []
    x = margin
    for col in columns:
        col_x.append(x)
        x += max((widths.get(n, 0.0) for n in col if not n.startswith(_WAY)), default=0.0) + rank_gap
    width = x - rank_gap + margin if columns else 2 * margin

    # Heights: stacked, then moved towards their neighbours (a few sweeps each way), kept apart.
    y: dict[str, float] = {}
    for col in columns:
        pos = 0.0
        for n in col:
            y[n] = pos + height(n) / 2
            pos += height(n) + node_gap
    for sweep in range(8):
        cols = columns if sweep % 2 == 0 else columns[::-1]
        side = up if sweep % 2 == 0 else down
        for col in cols:
            want = {n: sum(y[m] for m in side[n]) / len(side[n]) if side[n] else y[n] for n in col}
            _place(col, want, y, height, node_gap)
    low = min((y[n] - height(n) / 2 for n in y), default=0.0)
    for n in y:
        y[n] += margin + top - low
    bottom = max((y[n] + height(n) / 2 for n in y), default=margin + top)

    boxes: dict[str, Box] = {}
    for k, col in enumerate(columns):
        col_w = max((widths.get(n, 0.0) for n in col if not n.startswith(_WAY)), default=0.0)
        for n in col:
            if not n.startswith(_WAY):
                w = widths.get(n, 0.0)
                boxes[n] = Box(x=col_x[k] + (col_w - w) / 2, y=y[n] - node_h / 2, w=w, h=node_h)
    edges: list[tuple[str, str, list[tuple[float, float]]]] = []
    for d, s, chain in chains:
        points = [boxes[d].right]
        for way in chain[1:-1]:
            k = level[d] + len(points)
            col_w = max((widths.get(n, 0.0) for n in columns[k] if not n.startswith(_WAY)), default=0.0)
            points.append((col_x[k] + col_w / 2, y[way]))
        points.append(boxes[s].left)
        edges.append((d, s, points))
    return Layout(width=width, height=bottom + margin, boxes=boxes, edges=edges)


def _place(
    col: list[str], want: Mapping[str, float], y: dict[str, float], h: Callable[[str], float], gap: float
) -> None:
    """Put ``col``'s nodes as near ``want`` as their order and spacing allow (``h``: a node's height)."""
    pos: dict[str, float] = {}
    prev: str | None = None
    for n in col:
        lowest = -1e18 if prev is None else pos[prev] + h(prev) / 2 + gap + h(n) / 2
        pos[n] = max(want[n], lowest)
        prev = n
    # The pass above only pushes down: shift the column up by as much as it pushed on average.
    shift = sum(pos[n] - want[n] for n in col) / len(col) if col else 0.0
    for n in col:
        y[n] = pos[n] - shift


def _order(columns: list[list[str]], up: Mapping[str, list[str]], down: Mapping[str, list[str]]) -> None:
    """Reorder each column in place by barycentre sweeps, keeping the order with fewest crossings."""
    best = [list(c) for c in columns]
    best_cross = _crossings(columns, down)
    for sweep in range(12):
        if best_cross == 0:
            break
        forward = sweep % 2 == 0
        indices = range(1, len(columns)) if forward else range(len(columns) - 2, -1, -1)
        for k in indices:
            ref = columns[k - 1] if forward else columns[k + 1]
            where = {n: i for i, n in enumerate(ref)}
            side = up if forward else down
            current = {n: i for i, n in enumerate(columns[k])}

            def key(
                n: str,
                where: dict[str, int] = where,
                side: Mapping[str, list[str]] = side,
                current: dict[str, int] = current,
            ) -> float:
                near = [where[m] for m in side[n] if m in where]
                return sum(near) / len(near) if near else float(current[n])

            columns[k].sort(key=key)
        cross = _crossings(columns, down)
        if cross < best_cross:
            best, best_cross = [list(c) for c in columns], cross
    columns[:] = best


def _crossings(columns: Sequence[Sequence[str]], down: Mapping[str, list[str]]) -> int:
    total = 0
    for k in range(len(columns) - 1):
        nxt = {n: i for i, n in enumerate(columns[k + 1])}
        pairs = [(i, nxt[m]) for i, n in enumerate(columns[k]) for m in down[n] if m in nxt]
        total += sum(1 for a, (i, j) in enumerate(pairs) for (p, q) in pairs[a + 1 :] if (i - p) * (j - q) < 0)
    return total
