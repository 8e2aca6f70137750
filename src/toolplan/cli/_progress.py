"""A live table of a running plan's steps, driven by the executor's events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from ..execute import PlanEvent, PlanFinished, PlanStarted, StepFinished, StepRetrying, StepStarted, StepStatus
from ._table import DETAIL_LIMIT, StepRow, short, steps_table

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

    Pass it as ``on_event``; put it in a `rich.live.Live` to see it change. ``tools`` (step id to
    tool) lets pending steps show their tool before they start. The table fits the console's width;
    while the plan runs and has more steps than the console has rows, it shows a counter and the
    running steps (then the latest finished ones) instead; once finished, every step.
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
            row.note = f"retrying: {short(event.error.message, DETAIL_LIMIT)}"
        elif isinstance(event, StepFinished):
            r = event.result
            row = self.rows.setdefault(r.id, _Row())
            # max(): a step cancelled while running may be recorded with 0 attempts after it started.
            row.tool, row.status, row.attempts = r.tool, r.status, max(row.attempts, r.attempts)
            row.started, row.ended = r.started_at, r.ended_at
            row.note = short(r.output if r.ok else r.error.message if r.error else r.status, DETAIL_LIMIT)
        elif isinstance(event, PlanFinished):
            self.finished = True

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        now = time.time()
        rows = [self._row(sid, row, now) for sid, row in self.rows.items()]
        # header, rule, the counter line and one spare line, so the live region never scrolls
        room = options.max_height - 4
        if self.finished or len(rows) <= room + 1:
            yield steps_table(rows, width=options.max_width)
            return
        yield Text(self.counter(), style="bold", no_wrap=True, overflow="ellipsis")
        if room > 0:
            yield steps_table(self._visible(rows, room), width=options.max_width)

    def counter(self) -> str:
        """How far the plan is, e.g. "17/40 done, 3 running, 1 failed"."""
        counts: dict[str, int] = {}
        for row in self.rows.values():
            counts[row.status] = counts.get(row.status, 0) + 1
        waiting, running = counts.pop("pending", 0), counts.pop("running", 0)
        done = len(self.rows) - waiting - running
        failed = counts.pop("failed", 0) + counts.pop("timed_out", 0)
        counts.pop("succeeded", None)
        parts = [f"{done}/{len(self.rows)} done", f"{running} running"]
        parts += [f"{failed} failed"] if failed else []
        parts += [f"{n} {status.replace('_', ' ')}" for status, n in counts.items()]
        return ", ".join(parts)

    def _visible(self, rows: list[StepRow], room: int) -> list[StepRow]:
        """The ``room`` rows to show when not all fit: running steps, then the latest finished, then the next."""
        order = {r.id: i for i, r in enumerate(rows)}
        running = [r for r in rows if r.status == "running"]
        ended = sorted(
            (r for r in rows if r.status not in ("running", "pending")),
            key=lambda r: self.rows[r.id].ended or 0.0,
            reverse=True,
        )
        waiting = [r for r in rows if r.status == "pending"]
        chosen = [*running, *ended, *waiting][:room]
        return sorted(chosen, key=lambda r: order[r.id])

    def _row(self, sid: str, row: _Row, now: float) -> StepRow:
        elapsed = None
        if row.started is not None:
            elapsed = (row.ended if row.ended is not None else now) - row.started
        label = "⠿ running" if row.status == "running" else ""
        return StepRow(sid, row.tool, row.status, row.attempts or None, elapsed, row.note, "dim", label)


@contextmanager
def live_progress(console: Console, view: ProgressView) -> Iterator[ProgressView]:
    """Show ``view`` live on ``console`` for the duration of the block (left on screen after)."""
    with Live(view, console=console, refresh_per_second=12, transient=False):
        yield view
