"""A live table of a running plan's steps, driven by the executor's events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..execute import PlanEvent, PlanFinished, PlanStarted, StepFinished, StepRetrying, StepStarted, StepStatus
from ._render import STATUS_STYLES, short

__all__ = ("ProgressView", "live_progress")


@dataclass(slots=True)
class _Row:
    tool: str = ""
    status: StepStatus = "pending"
    attempts: int = 0
    started: float | None = None
    ended: float | None = None
    note: str = ""


class ProgressView:
    """Keeps one row per step up to date from `PlanEvent`s; renders itself as a rich table.

    Pass it as ``on_event``; put it in a `rich.live.Live` to see it change.
    """

    def __init__(self, tools: dict[str, str] | None = None) -> None:
        self.rows: dict[str, _Row] = {sid: _Row(tool=t) for sid, t in (tools or {}).items()}
        self.finished = False

    def __call__(self, event: PlanEvent) -> None:
        if isinstance(event, PlanStarted):
            for sid in event.steps:
                self.rows.setdefault(sid, _Row())
        elif isinstance(event, StepStarted):
            row = self.rows.setdefault(event.step_id, _Row())
            row.tool, row.status, row.attempts, row.note = event.tool, "running", event.attempt, ""
            if row.started is None:
                row.started = event.at
        elif isinstance(event, StepRetrying):
            row = self.rows.setdefault(event.step_id, _Row())
            row.note = f"retrying: {short(event.error.message, 50)}"
        elif isinstance(event, StepFinished):
            r = event.result
            row = self.rows.setdefault(r.id, _Row())
            # max(): a step cancelled while running may be recorded with 0 attempts after it started.
            row.tool, row.status, row.attempts = r.tool, r.status, max(row.attempts, r.attempts)
            row.started, row.ended = r.started_at, r.ended_at
            row.note = short(r.output, 70) if r.ok else short(r.error.message if r.error else r.status, 70)
        elif isinstance(event, PlanFinished):
            self.finished = True

    def __rich__(self) -> Table:
        table = Table(show_edge=False, pad_edge=False)
        step_w = max((len(s) for s in self.rows), default=4)
        tool_w = max((len(r.tool) for r in self.rows.values()), default=4)
        table.add_column("step", no_wrap=True, min_width=step_w)
        table.add_column("tool", no_wrap=True, min_width=tool_w)
        table.add_column("status", no_wrap=True, min_width=11)
        table.add_column("attempts", no_wrap=True, justify="right", min_width=8)
        table.add_column("time", no_wrap=True, justify="right", min_width=6)
        table.add_column("", overflow="ellipsis", no_wrap=True)
        now = time.time()
        for sid, row in self.rows.items():
            elapsed = ""
            if row.started is not None:
                elapsed = f"{(row.ended if row.ended is not None else now) - row.started:.2f}s"
            status = Text(("⠿ " if row.status == "running" else "") + row.status, style=STATUS_STYLES[row.status])
            table.add_row(sid, row.tool, status, str(row.attempts or ""), elapsed, Text(row.note, style="dim"))
        return table


@contextmanager
def live_progress(console: Console, view: ProgressView) -> Iterator[ProgressView]:
    """Show ``view`` live on ``console`` for the duration of the block (left on screen after)."""
    with Live(view, console=console, refresh_per_second=12, transient=False):
        yield view
