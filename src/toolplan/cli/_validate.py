"""``toolplan validate``: check a plan without running any tool."""

from __future__ import annotations

import typer

from ._common import (
    EXIT_INVALID,
    EXIT_OK,
    DialectOpt,
    JsonOpt,
    MaxStepsOpt,
    PlanArg,
    ToolsOpt,
    out,
    read_inputs,
    report_invalid,
    stdout_to_stderr,
    validate_inputs,
)
from ._render import print_issues, print_json, say

__all__ = ("validate_command",)


def validate_command(
    plan: PlanArg,
    tools: ToolsOpt = None,
    as_json: JsonOpt = False,
    dialect: DialectOpt = None,
    max_steps: MaxStepsOpt = None,
) -> None:
    """Check a plan without running anything (without --tools: its structure and references only).

    Exit code 0 when the plan is valid, 2 when it is not.
    """
    with stdout_to_stderr(as_json):
        data, registry = read_inputs(plan, tools)
        report = validate_inputs(data, registry, dialect, max_steps)
    if as_json:
        print_json(out, report.to_dict())
        raise typer.Exit(EXIT_OK if report.ok else EXIT_INVALID)
    if not report.ok:
        report_invalid(report, as_json=False, console=out)
    compiled = report.compiled
    assert compiled is not None
    n, w = len(compiled.steps), len(compiled.waves())
    checked = "" if registry is not None else " (structure only: pass --tools to check tools and arguments)"
    say(
        out,
        f"The plan is valid: {n} step{'s' if n != 1 else ''} in {w} wave{'s' if w != 1 else ''}{checked}.",
        "green",
    )
    if report.warnings:
        say(out, "Warnings:", "bold yellow")
        print_issues(out, report.warnings, style="yellow")
    raise typer.Exit(EXIT_OK)
