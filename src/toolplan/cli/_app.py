"""The ``toolplan`` app: made here, with each command registered from its own module."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from .._version import __version__
from ._agent import agent_command
from ._audit import audit_command
from ._common import Command, command_group
from ._demo_command import demo_command
from ._graph import graph_command
from ._mcp import mcp_app
from ._run import run_command
from ._runs import runs_app
from ._schedules import scheduler_command
from ._serve import ServeCommand, keys_app, serve_command
from ._skills import skills_app
from ._validate import validate_command

__all__ = ("app", "main")

app = command_group(
    name="toolplan",
    help="Validate, run and inspect toolplan plans: many tool calls from one model turn.",
    epilog="'toolplan COMMAND -h' shows a command's usage and options; 'toolplan demo' shows what toolplan does.",
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"toolplan {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Validate, run and inspect toolplan plans: many tool calls from one model turn."""


app.command("run", cls=Command, short_help="Run a plan with the tools of a Python file.")(run_command)
app.command("agent", cls=Command, short_help="Run an agent on a task with the tools of a Python file.")(agent_command)
app.command("validate", cls=Command, short_help="Check a plan without running any tool.")(validate_command)
app.command("demo", cls=Command, short_help="See toolplan work: a plan, then an agent task three ways.")(demo_command)
app.command("graph", cls=Command, short_help="Draw a plan's dependency graph: Mermaid text, SVG or PNG.")(graph_command)
app.add_typer(runs_app, name="runs", help="List, show, resume and work through stored (durable) runs.")
app.command("serve", cls=ServeCommand, short_help="Serve the planner API (REST, GraphQL) over a store.")(serve_command)
app.add_typer(keys_app, name="keys", help="Make, list and revoke the planner service's API keys.")
app.command("scheduler", cls=Command, short_help="Fire due schedules and run the plans they start.")(scheduler_command)
app.add_typer(skills_app, name="skills", help="List and run saved plans (skills).")
app.command("audit", cls=Command, short_help="Compare what a stored run declared with what it did.")(audit_command)
app.add_typer(mcp_app, name="mcp", help="List an MCP server's tools, or serve tools and plans over MCP.")


def _tolerant_output() -> None:
    """Write characters the terminal's encoding lacks as backslash escapes, never a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):  # a replaced or detached stream: leave it as it is
                reconfigure(errors="backslashreplace")


def main() -> None:
    """Entry point of the ``toolplan`` console script."""
    _tolerant_output()
    app(prog_name="toolplan")
