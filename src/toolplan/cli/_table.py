"""The table of a plan's steps, laid out to fit a width.

The step id, tool, status, attempts and time columns keep their full width for as long as they
can; the output column is the one that gives way. Only when the width is too small even for that
do the step ids and tool names get cut (with an ellipsis), the ``attempts`` header become ``tries``,
and then the output and tool columns go, in that order. With no width (output that is not a
terminal) nothing is cut below the caps that bound hostile values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from .._json import dumps, encodable
from ..execute import StepStatus

__all__ = ("DETAIL_LIMIT", "NAME_LIMIT", "STATUS_STYLES", "Layout", "StepRow", "fit", "short", "steps_table")

STATUS_STYLES: dict[StepStatus, str] = {
    "pending": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "not_run": "yellow",
    "unknown_outcome": "bold red",
    "rejected": "red",
    "pending_approval": "bold magenta",
}

DETAIL_LIMIT = 200  # characters of an output or error shown in a table, at most
NAME_LIMIT = 40  # characters of a step id or tool name shown in a table, at most
_SEP = 3  # " │ " between two columns (the table has no outer edge and no edge padding)
_STATUS_WIDTH = 9  # "succeeded", "timed_out", "cancelled", "⠿ running": fixed, so rows do not jump
_DETAIL_HEADER, _DETAIL_HEADER_SHORT = "output / error", "output"


def short(value: Any, limit: int = 60) -> str:
    """A value as compact one-line text, cut to ``limit`` characters."""
    text = encodable(value) if isinstance(value, str) else dumps(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class StepRow:
    """What one line of the table shows; ``attempts`` and ``seconds`` are blank when ``None``."""

    id: str
    tool: str
    status: StepStatus
    attempts: int | None
    seconds: float | None
    detail: str
    detail_style: str = ""
    label: str = ""  # the status text, when it is not the status itself (e.g. with a spinner)


@dataclass(frozen=True, slots=True)
class Layout:
    """Column widths (0: the column is left out) and the headers that fit them."""

    step: int
    tool: int
    status: int
    attempts: int
    time: int
    detail: int
    attempts_header: str
    detail_header: str

    @property
    def total(self) -> int:
        """The table's width, separators included."""
        widths = [w for w in (self.step, self.tool, self.status, self.attempts, self.time, self.detail) if w]
        return sum(widths) + _SEP * (len(widths) - 1)


# What to try, best first: attempts header, least output width (0: no output column), least width a
# step id or tool name is cut to, whether the tool column is shown.
_FALLBACKS: tuple[tuple[str, int, int, bool], ...] = (
    ("attempts", len(_DETAIL_HEADER), 12, True),
    ("attempts", len(_DETAIL_HEADER_SHORT), 10, True),
    ("tries", len(_DETAIL_HEADER_SHORT), 8, True),
    ("tries", 0, 6, True),
    ("tries", 0, 4, False),
)


def _cut(widths: list[int], room: int, floor: int) -> list[int] | None:
    """Narrow the widest of ``widths`` until they fit in ``room``, none below ``floor``; None if impossible."""
    widths = list(widths)
    while sum(widths) > room:
        i = max(range(len(widths)), key=widths.__getitem__)
        if widths[i] <= floor:
            return None
        widths[i] -= 1
    return widths


def fit(rows: Sequence[StepRow], width: int | None) -> Layout:
    """The layout of ``rows`` in ``width`` columns, or at full size when ``width`` is None."""
    step = min(max((len(r.id) for r in rows), default=0), NAME_LIMIT)
    tool = min(max((len(r.tool) for r in rows), default=0), NAME_LIMIT)
    step, tool = max(step, len("step")), max(tool, len("tool"))
    tries = max((len(str(r.attempts)) for r in rows if r.attempts is not None), default=1)
    time = max([len("time"), *(len(_seconds(r.seconds)) for r in rows)])
    detail = max([len(_DETAIL_HEADER), *(min(len(r.detail), DETAIL_LIMIT) for r in rows)])
    if width is None:
        return Layout(step, tool, _STATUS_WIDTH, max(tries, 8), time, detail, "attempts", _DETAIL_HEADER)
    layout: Layout | None = None
    for header, least_detail, floor, show_tool in _FALLBACKS:
        attempts = max(tries, len(header))
        columns = 4 + show_tool + (least_detail > 0)
        room = width - _STATUS_WIDTH - attempts - time - _SEP * (columns - 1) - least_detail
        wanted = [step, tool] if show_tool else [step]
        names = _cut(wanted, room, floor)
        fits = names is not None
        names = names if names is not None else [min(n, floor) for n in wanted]
        out = min(detail, room - sum(names) + least_detail) if least_detail and fits else least_detail
        d_header = _DETAIL_HEADER if out >= len(_DETAIL_HEADER) else _DETAIL_HEADER_SHORT
        layout = Layout(names[0], names[1] if show_tool else 0, _STATUS_WIDTH, attempts, time, out, header, d_header)
        if fits:
            return layout
    assert layout is not None
    return layout  # nothing fits: the narrowest layout, for the console to cut


def _seconds(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.2f}s"


def steps_table(rows: Sequence[StepRow], *, width: int | None) -> Table:
    """A table of ``rows`` that fits ``width`` columns (see the module docstring), or at full size."""
    lay = fit(rows, width)
    table = Table(show_edge=False, pad_edge=False, width=lay.total)
    table.add_column("step", width=lay.step, no_wrap=True, overflow="ellipsis")
    if lay.tool:
        table.add_column("tool", width=lay.tool, no_wrap=True, overflow="ellipsis")
    table.add_column("status", width=lay.status, no_wrap=True, overflow="ellipsis")
    table.add_column(lay.attempts_header, width=lay.attempts, no_wrap=True, justify="right")
    table.add_column("time", width=lay.time, no_wrap=True, justify="right")
    if lay.detail:
        table.add_column(lay.detail_header, width=lay.detail, no_wrap=True, overflow="ellipsis")
    for r in rows:
        cells: list[Text | str] = [Text(r.id, overflow="ellipsis")]
        if lay.tool:
            cells.append(Text(r.tool, overflow="ellipsis"))
        cells += [
            Text(r.label or r.status, style=STATUS_STYLES[r.status]),
            "" if r.attempts is None else str(r.attempts),
            _seconds(r.seconds),
        ]
        if lay.detail:
            cells.append(Text(short(r.detail, min(lay.detail, DETAIL_LIMIT)), style=r.detail_style))
        table.add_row(*cells)
    return table
