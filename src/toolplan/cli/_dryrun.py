"""``toolplan run --dry-run``: what a plan would do, as a table or JSON; no tool is called."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._errors import ToolplanError
from ..execute import ApprovalRule, DryRunReport, DryRunStep, RunLimits, execute_plan
from ..tools import ToolRegistry
from ._common import EXIT_OK, fail, opened_store, out
from ._render import print_json, say
from ._table import NAME_LIMIT, short

__all__ = ("dry_run", "print_dry_run")


async def _report(data: Any, registry: ToolRegistry, db: str | None, **options: Any) -> DryRunReport:
    report: DryRunReport
    if db is None:
        report = await execute_plan(data, registry, dry_run=True, **options)
        return report
    async with opened_store(db) as store:  # read only: the tools' latencies in the stored runs
        report = await execute_plan(data, registry, dry_run=True, store=store, **options)
        return report


def dry_run(
    data: Any,
    registry: ToolRegistry,
    *,
    limits: RunLimits,
    db: str | None,
    dialect: str | None,
    max_steps: int | None,
    as_json: bool,
    loop: asyncio.Runner,
    approval: ApprovalRule | None = None,
) -> NoReturn:
    """Print the dry run's report of a valid plan (with the steps ``approval`` would hold) and exit 0."""
    try:
        options: dict[str, Any] = {"limits": limits, "dialect": dialect, "max_steps": max_steps, "approval": approval}
        report = loop.run(_report(data, registry, db, **options))
    except ToolplanError as exc:  # one line, never a traceback
        fail(f"The dry run failed: {' '.join(exc.message.split())}")
    if as_json:
        print_json(out, report.to_dict())
    else:
        print_dry_run(out, report)
    raise typer.Exit(EXIT_OK)


def _tool(step: DryRunStep) -> str:
    tool = step.tool if not step.alternatives else f"one of {', '.join(step.alternatives)}"
    return tool if step.fallback is None else f"{tool} (fallback {step.fallback})"


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}s"


def print_dry_run(console: Console, report: DryRunReport) -> None:
    """The report as a table of steps and a few lines under it."""
    approval = report.needs_approval is not None
    steps = list(report.steps.values())
    table = Table(box=None, show_edge=False, pad_edge=False)
    names = [short(s.id, NAME_LIMIT) for s in steps]
    tools = [short(_tool(s), 2 * NAME_LIMIT) for s in steps]
    table.add_column("wave", no_wrap=True)
    table.add_column("step", no_wrap=True, min_width=min(max(map(len, names)), NAME_LIMIT))
    table.add_column("tool", overflow="fold", min_width=min(max(map(len, tools)), NAME_LIMIT // 2))
    table.add_column("annotations", overflow="fold")
    for header in ("calls", "cost", "time"):
        table.add_column(header, no_wrap=True)
    if approval:
        table.add_column("approval", no_wrap=True)
    for s, name, tool in zip(steps, names, tools, strict=True):
        marks = Text(" ".join(s.annotations) or "writes", style="bold red" if s.destructive else "")
        row: list[Any] = [
            str(s.wave + 1),
            Text(name),
            Text(tool),
            marks,
            str(s.calls),
            f"{s.cost:g}",
            _seconds(s.expected_seconds),
        ]
        if approval:
            row.append(Text("needed", style="bold yellow") if s.needs_approval else Text("-"))
        table.add_row(*row)
    console.print(table)
    refs = "" if all(s.literal for s in steps) else " (* holds references, filled in when the step runs)"
    say(console, f"Arguments{refs}:")
    for s, name in zip(steps, names, strict=True):
        say(console, f"  {name}: {short(dict(s.arguments), 200)}{'' if s.literal else ' *'}")
    n, w = len(report.steps), len(report.waves)
    say(console, f"Dry run: nothing was called. {n} step{'s' if n != 1 else ''} in {w} wave{'s' if w != 1 else ''}.")
    say(console, f"Critical path: {' -> '.join(report.critical_path)}")
    if report.destructive:
        say(console, f"Destructive steps: {', '.join(report.destructive)}", "bold red")
    if report.needs_approval is not None:
        needs = ", ".join(report.needs_approval) or "none"
        say(console, f"Steps that would need approval: {needs}", "yellow" if report.needs_approval else None)
    b = report.budget
    limits = b.limits
    caps = [
        f"max_tool_calls={limits.max_tool_calls}" if limits.max_tool_calls is not None else "",
        f"max_cost={limits.max_cost:g}" if limits.max_cost is not None else "",
    ]
    caps.extend(f"max_tool_calls_per_tool[{t}]={c}" for t, c in limits.max_tool_calls_per_tool.items())
    shown = ", ".join(c for c in caps if c) or "no limits"
    say(console, f"Budget, worst case (every retry and fallback): {b.calls} calls, cost {b.cost:g} ({shown}).")
    for sentence in b.over:
        say(console, f"  Over the budget: {sentence}: steps past it would end not_run.", "bold yellow")
    if report.expected_seconds is not None:
        say(console, f"Expected duration: {_seconds(report.expected_seconds)} ({report.duration_note}).")
    else:
        say(console, f"Expected duration: {report.duration_note}.", "dim")
