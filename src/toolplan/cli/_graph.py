"""``toolplan graph``: a plan's dependency graph as Mermaid text, SVG or PNG, coloured by a run's outcome."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .._errors import ToolplanError
from .._json import JSONTextError, loads
from ..plan import CompiledPlan, validate_plan
from ._common import (
    EXIT_OK,
    DialectOpt,
    MaxStepsOpt,
    ToolsOpt,
    db_option,
    err,
    fail,
    read_inputs,
    report_invalid,
    validate_inputs,
    with_store,
)
from ._render import say

if TYPE_CHECKING:
    from .._ui._internal import Outcome

__all__ = ("graph_command",)


StoreOpt = Annotated[str | None, db_option("The database the run of --run-id is stored in.")]


class PictureChoice(enum.StrEnum):
    """What ``toolplan graph`` writes."""

    mermaid = "mermaid"
    svg = "svg"
    png = "png"


def graph_command(
    plan: Annotated[
        str | None,
        typer.Argument(
            metavar="PLAN.json",
            help="The plan file, or '-' to read it from stdin (not needed with --run-id: the store has the plan).",
        ),
    ] = None,
    tools: ToolsOpt = None,
    picture: Annotated[
        PictureChoice | None,
        typer.Option(
            "--format",
            "-f",
            metavar="mermaid|svg|png",
            help="What to write (default: from -o's extension, else mermaid).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write to this file (default: standard output)."),
    ] = None,
    result: Annotated[
        Path | None,
        typer.Option(
            "--result",
            metavar="RESULT.json",
            help="Colour the steps by how a run ended: the JSON `toolplan run --json` printed.",
        ),
    ] = None,
    db: StoreOpt = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", metavar="ID", help="Draw this stored run (with --db), coloured by how its steps ended."
        ),
    ] = None,
    dialect: DialectOpt = None,
    max_steps: MaxStepsOpt = None,
) -> NoReturn:
    """Write the plan's dependency graph: Mermaid text (one subgraph per wave), an SVG or a PNG picture.

    With --result (a `toolplan run --json` output) or a stored run (--db URL --run-id ID), each step
    is coloured by how it ended and the critical path is outlined.
    """
    kind = _format(picture, output)
    outcome: Outcome | None
    if run_id is not None:
        if plan is not None or result is not None:
            fail("--run-id draws the stored run's own plan and outcome: leave out PLAN.json and --result.")
        if db is None:
            fail("--run-id needs the store it is in: pass --db URL (or set TOOLPLAN_DB).")
        compiled, outcome = _stored(db, run_id)
    else:
        if plan is None:
            fail("graph needs a plan: pass PLAN.json (or --db URL --run-id ID for a stored run).")
        data, registry = read_inputs(plan, tools)
        report = validate_inputs(data, registry, dialect, max_steps)
        if not report.ok or report.compiled is None:
            report_invalid(report, as_json=False, console=err)
        compiled = report.compiled
        outcome = _outcome_file(result, compiled) if result is not None else None
    from .._ui._internal import render_picture

    tool_of = {sid: c.step.tool for sid, c in compiled.steps.items()}
    try:
        body = render_picture(compiled.deps, tool_of, format=kind.value, outcome=outcome)
    except ToolplanError as exc:  # Pillow missing, for PNG
        fail(exc.message)
    _write(body, output, kind)
    raise typer.Exit(EXIT_OK)


def _format(picture: PictureChoice | None, output: Path | None) -> PictureChoice:
    if picture is not None:
        return picture
    suffix = output.suffix.lower().lstrip(".") if output is not None else ""
    if suffix in ("svg", "png"):
        return PictureChoice(suffix)
    return PictureChoice.mermaid


def _write(body: bytes, output: Path | None, kind: PictureChoice) -> None:
    if output is None:
        if kind is PictureChoice.png and sys.stdout.isatty():
            fail("A PNG is not for the terminal: pass -o FILE.png (or pipe the output to a file).")
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
        return
    try:
        output.write_bytes(body)
    except OSError as exc:
        fail(f"Cannot write {str(output)!r}: {exc.strerror or exc}. Check the folder exists and is writable.")
    say(err, f"Wrote {output} ({kind.value}, {len(body):,} bytes).", "dim")


def _outcome_file(path: Path, compiled: CompiledPlan) -> Outcome:
    from .._ui._internal import outcome_from_json

    where = f"--result file {str(path)!r}"
    try:
        data: Any = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        fail(f"{where} does not exist: give the JSON file `toolplan run PLAN --json > FILE` wrote.")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"Cannot read {where}: {getattr(exc, 'strerror', None) or exc}.")
    except JSONTextError as exc:
        fail(f"{where} is not valid JSON: {exc.message}. {exc.advice}.")
    if not isinstance(data, dict):
        fail(f"{where} is not a run's result: give the JSON that `toolplan run --json` printed.")
    try:
        outcome = outcome_from_json(data, compiled.deps)
    except ValueError as exc:
        fail(f"{where} is not a run's result: {exc}")
    unknown = sorted(set(outcome.steps) - set(compiled.steps))
    if unknown:
        shown = ", ".join(unknown[:5])
        fail(f"{where} has steps the plan does not ({shown}): give the result of a run of this plan.")
    return outcome


def _stored(db: str, run_id: str) -> tuple[CompiledPlan, Outcome]:
    from .._ui._internal import outcome_of

    async def load(store: Any) -> Any:
        return await store.get_run(run_id)

    info = with_store(db, load)
    report = validate_plan(info.plan)
    if report.compiled is None:  # stored plans were valid when they ran
        fail(f"The stored plan of run {run_id!r} cannot be drawn: {report.errors[0].message}")
    return report.compiled, outcome_of(info.result)
