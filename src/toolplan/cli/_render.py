"""Static output of the CLI: issue lists, the step table, outputs and the run summary."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._errors import PlanIssue
from .._json import dumps
from ..execute import PlanResult, StepResult, StepStatus

__all__ = (
    "STATUS_STYLES",
    "print_errors",
    "print_issues",
    "print_json",
    "print_outputs",
    "print_summary",
    "say",
    "short",
    "step_table",
)

STATUS_STYLES: dict[StepStatus, str] = {
    "pending": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "not_run": "yellow",
}


def print_json(console: Console, data: Any) -> None:
    """``data`` as indented JSON text, exactly (no markup, no wrapping).

    Always valid JSON (`toolplan._json.dumps`); ASCII with escapes when the console's
    encoding is not UTF (``PYTHONIOENCODING=ascii``), so that every character survives.
    """
    text = dumps(data, indent=2, ensure_ascii=not console.encoding.startswith("utf"))
    console.out(text, highlight=False)


def say(console: Console, text: str, style: str | None = None) -> None:
    """One line of plain text (never read as markup, never wrapped)."""
    console.print(Text(text, style=style or ""), soft_wrap=True, highlight=False)


def print_issues(console: Console, issues: Iterable[PlanIssue], *, style: str) -> None:
    """A readable list of plan issues, one per line."""
    for issue in issues:
        where = f"step {issue.step!r}: " if issue.step is not None else ""
        line = Text("  - ")
        line.append(f"[{issue.code}] ", style=style)
        line.append(f"{where}{issue.message}")
        console.print(line, soft_wrap=True, highlight=False)


def short(value: Any, limit: int = 60) -> str:
    """A value as compact one-line text, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else dumps(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _duration(r: StepResult) -> str:
    d = r.duration
    return "" if d is None else f"{d:.2f}s"


def step_table(result: PlanResult, *, width: int = 100) -> Table:
    """The final table of steps: status, tool, attempts, duration, and output or error.

    ``width`` is the space available; the output / error column is cut to fit it.
    """
    table = Table(show_edge=False, pad_edge=False)
    fixed = {
        "step": max((len(sid) for sid in result.steps), default=4),
        "tool": max((len(r.tool) for r in result.steps.values()), default=4),
        "status": 9,
        "attempts": 8,
        "time": 6,
    }
    for name, w in fixed.items():
        table.add_column(name, no_wrap=True, min_width=w, justify="right" if name in ("attempts", "time") else "left")
    table.add_column("output / error", no_wrap=True)
    room = max(width - sum(fixed.values()) - 3 * len(fixed) - 1, 20)
    for r in result.steps.values():
        detail = short(r.output, room) if r.ok else short(r.error.message if r.error else r.status, room)
        table.add_row(
            r.id,
            r.tool,
            Text(r.status, style=STATUS_STYLES[r.status]),
            str(r.attempts),
            _duration(r),
            Text(detail, style="" if r.ok else "red"),
        )
    return table


def print_errors(console: Console, result: PlanResult) -> None:
    """The full error message of every step that did not succeed."""
    if not result.errors:
        return
    say(console, "Errors:", "bold red")
    for sid, error in result.errors.items():
        status = result.steps[sid].status
        label = status if status == error.kind else f"{status}, {error.kind}"
        line = Text(f"  - {sid} ")
        line.append(f"[{label}]", style=STATUS_STYLES[status])
        line.append(f" {error.message}")
        console.print(line, soft_wrap=True, highlight=False)


def print_outputs(console: Console, result: PlanResult) -> None:
    """The output steps' values as JSON."""
    if not result.outputs:
        return
    say(console, "Outputs:", "bold")
    print_json(console, result.outputs)


def print_summary(console: Console, result: PlanResult) -> None:
    """One line: plan status, step counts, wall time and achieved parallelism."""
    counts: dict[str, int] = {}
    for r in result.steps.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    style = "bold green" if result.ok else "bold red"
    say(
        console,
        f"Plan {result.status}: {parts} in {result.duration:.2f}s (parallelism {result.parallelism:.1f}x).",
        style,
    )
