"""``toolplan skills``: list and run saved plans (skills)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .._errors import ToolError
from .._json import loads
from ._common import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    Command,
    JsonOpt,
    ToolsOpt,
    command_group,
    db_option,
    fail,
    needed_tools,
    out,
    with_store,
)
from ._render import print_json, print_listing

if TYPE_CHECKING:
    from ..store import Store

__all__ = ("skills_app",)

skills_app = command_group()


def _params(pairs: list[str]) -> dict[str, Any]:
    """``x=1`` pairs: a value that reads as JSON is that JSON (1, true, [1]), anything else is text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            fail(f"--param {pair[:80]!r} is not NAME=VALUE: write --param city=Oslo or --param n=3.")
        try:
            out[name.strip()] = loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


@skills_app.command("list", cls=Command, short_help="List the saved skills, or those a query finds.")
def list_command(
    db: Annotated[str | None, db_option("The database the skills are saved in.")] = None,
    query: Annotated[str, typer.Option("--query", "-q", metavar="TEXT", help="Find skills by what they do.")] = "",
    limit: Annotated[int, typer.Option("--limit", min=1, max=50, help="Most skills shown.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List the saved plans (skills) of a store: name, version, description, parameters."""
    from ..skills import SkillTools

    async def go(store: Store) -> list[dict[str, Any]]:
        return await SkillTools(store, []).skill_search(query, limit=limit)

    found = with_store(db, go, what="skills")
    if as_json:
        print_json(out, found)
        return
    rows = [
        (s["name"], str(s["version"]), ", ".join(s["parameters"].get("properties", {})), s["description"])
        for s in found
    ]
    print_listing(out, ("name", "version", "parameters", "description"), rows)


@skills_app.command("run", cls=Command, short_help="Run a saved skill with its parameters.")
def run_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The skill's name (toolplan skills list).")],
    tools: ToolsOpt = None,
    db: Annotated[str | None, db_option("The database the skill is saved in.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", metavar="NAME=VALUE", help="A parameter; repeat for each (JSON or text)."),
    ] = None,
    as_json: JsonOpt = False,
) -> NoReturn:
    """Run skill NAME with the tools of --tools; prints its outputs as JSON.

    Exit code 0 when it succeeded, 1 when it ran and failed, 2 when it cannot run (no such skill,
    parameters it does not take, a tool it needs is missing).
    """
    from ..skills import SkillTools

    registry = needed_tools(tools, "skills run", "the tools the skill calls")
    params = _params(param or [])

    async def go(store: Store) -> dict[str, Any] | str:
        try:
            return await SkillTools(store, registry).skill_run(name, params)
        except ToolError as exc:
            return " ".join(exc.message.split())

    outcome = with_store(db, go, what="skills")
    if isinstance(outcome, str):
        ran = outcome.startswith("Skill ") and " failed: " in outcome  # its plan ran, and a step failed
        if as_json:
            print_json(out, {"ok": False, "error": outcome})
        else:
            sys.stderr.write(f"Error: {outcome}\n")
        raise typer.Exit(EXIT_FAILED if ran else EXIT_INVALID)
    print_json(out, {"ok": True, "outputs": outcome} if as_json else outcome)
    raise typer.Exit(EXIT_OK)
