"""Static output of the CLI: issue lists, the step table, outputs and the run summary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._errors import PlanIssue
from .._json import dumps
from ..execute import PlanResult, StepResult
from ._table import DETAIL_LIMIT, STATUS_STYLES, StepRow, short, steps_table

__all__ = (
    "STATUS_STYLES",
    "print_errors",
    "print_issues",
    "print_json",
    "print_listing",
    "print_outputs",
    "print_step_table",
    "print_summary",
    "prose",
    "say",
    "short",
    "step_table",
)


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


def prose(console: Console, text: str, style: str | None = None) -> None:
    """A sentence or two: word-wrapped on a terminal, one line otherwise (like `say`)."""
    if not console.is_terminal:
        say(console, text, style)
        return
    console.print(Text(text, style=style or ""), highlight=False)


def print_listing(console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]], *, whole: int = 1) -> None:
    """A listing (runs, tools, keys): ids are never cut.

    On a terminal, a table whose first ``whole`` columns keep their full width (the others fold).
    Elsewhere (a pipe, a file), or on a terminal too narrow for that, plain text: one line per row,
    columns padded with spaces, nothing cut.
    """
    cells = [[" ".join(str(c).split()) for c in row] for row in rows]  # one line per row, whatever the value
    widths = [max([cell_len(h), *(cell_len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    room = sum(widths[:whole]) + sum(cell_len(h) for h in headers[whole:]) + 2 * (len(headers) - 1)
    if not console.is_terminal or room > console.width:  # too narrow a terminal: long lines, which it wraps
        for line in (list(headers), *cells):
            text = "  ".join(c + " " * (w - cell_len(c)) for c, w in zip(line, widths, strict=True))
            console.out(text.rstrip(), highlight=False)
        return
    table = Table(box=None, show_edge=False, pad_edge=False)
    for i, header in enumerate(headers):
        if i < whole:
            table.add_column(header, no_wrap=True, min_width=widths[i])
        else:
            table.add_column(header, overflow="fold", min_width=cell_len(header))
    for row in cells:
        table.add_row(*(Text(c) for c in row))
    console.print(table)


def print_issues(console: Console, issues: Iterable[PlanIssue], *, style: str) -> None:
    """A readable list of plan issues, one per line."""
    for issue in issues:
        where = f"step {issue.step!r}: " if issue.step is not None else ""
        line = Text("  - ")
        line.append(f"[{issue.code}] ", style=style)
        line.append(f"{where}{issue.message}")
        console.print(line, soft_wrap=True, highlight=False)


def _row(r: StepResult) -> StepRow:
    detail = r.output if r.ok else (r.error.message if r.error else r.status)
    label = (
        "reused"
        if r.reused and r.ok
        else "unknown"
        if r.status == "unknown_outcome"
        else "cached"
        if r.cached and r.ok
        else "shared"  # another step's call: its outcome, no call of its own
        if r.shared_with and not r.attempts and r.ok
        else ""
    )
    return StepRow(
        r.id, r.tool, r.status, r.attempts, r.duration, short(detail, DETAIL_LIMIT), "" if r.ok else "red", label
    )


def step_table(result: PlanResult, *, width: int | None) -> Table:
    """The final table of steps: status, tool, attempts, duration, and output or error.

    ``width`` is the space available (the output / error column gives way first); ``None`` lays the
    table out at full size, for output that is not a terminal.
    """
    return steps_table([_row(r) for r in result.steps.values()], width=width)


def print_step_table(console: Console, result: PlanResult) -> None:
    """The final table of steps, fitted to a terminal's width; at full size when not a terminal.

    Not on a terminal, the lines carry no trailing blanks (there is no colour to keep either).
    """
    if console.is_terminal:
        console.print(step_table(result, width=console.width))
        return
    table = step_table(result, width=None)
    for line in console.render_lines(table, console.options.update_width(table.width or console.width)):
        console.out("".join(segment.text for segment in line).rstrip(), highlight=False)


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


def print_summary(console: Console, result: PlanResult, *, unfinished: bool = False) -> None:
    """One line: plan status, step counts, wall time and parallelism (for an unfinished stored run: the counts)."""
    counts: dict[str, int] = {}
    for r in result.steps.values():
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    reused = sum(1 for r in result.steps.values() if r.reused)
    if reused:
        parts += f" ({reused} reused from the store, not run again)"
    cached = sum(1 for r in result.steps.values() if r.cached and not r.reused)
    if cached:
        parts += f" ({cached} answered from the cache, not called)"
    if unfinished:
        say(console, f"Run unfinished: {parts}.", "bold yellow")
        return
    style = "bold green" if result.ok else "bold red"
    ran = any(not r.reused and r.duration for r in result.steps.values())  # a reused run: no parallelism to show
    parallelism = f" (parallelism {result.parallelism:.1f}x)" if ran and result.parallelism > 0 else ""
    say(console, f"Plan {result.status}: {parts} in {result.duration:.2f}s{parallelism}.", style)
    if result.approval is not None:
        waiting = ", ".join(result.approval.step_ids)
        say(console, f"Waiting for approval: {waiting}. Answer with: toolplan runs approve {result.run_id}", "yellow")
