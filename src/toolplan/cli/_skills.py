"""``toolplan skills``: list and run saved plans (skills)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from .._errors import ToolError
from .._json import loads
from ._app import EXIT_FAILED, EXIT_OK, DbOpt, JsonOpt, ToolsOpt, _Command, _err, _fail, _out, command_group
from ._loader import CliInputError, load_tools
from ._render import print_json, say
from ._runs import _with_store

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
            _fail(f"--param {pair[:80]!r} is not NAME=VALUE: write --param city=Oslo or --param n=3.")
        try:
            out[name.strip()] = loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


@skills_app.command("list", cls=_Command, short_help="List the saved skills, or those a query finds.")
def list_command(
    db: DbOpt = None,
    query: Annotated[str, typer.Option("--query", "-q", metavar="TEXT", help="Find skills by what they do.")] = "",
    limit: Annotated[int, typer.Option("--limit", min=1, max=50, help="Most skills shown.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List the saved plans (skills) of a store: name, version, description, parameters."""
    from ..skills import SkillTools

    if db is None:
        _fail("Name the database of the skills: pass --db URL or set TOOLPLAN_DB.")

    async def go(store: Store) -> list[dict[str, Any]]:
        return await SkillTools(store, []).skill_search(query, limit=limit)

    found = _with_store(db, go)
    if as_json:
        print_json(_out, found)
        return
    table = Table("name", "version", "parameters", "description", box=None)
    for skill in found:
        names = ", ".join(skill["parameters"].get("properties", {}))
        table.add_row(skill["name"], str(skill["version"]), names, skill["description"][:80])
    _out.print(table)


@skills_app.command("run", cls=_Command, short_help="Run a saved skill with its parameters.")
def run_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The skill's name (toolplan skills list).")],
    tools: ToolsOpt = None,
    db: DbOpt = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", metavar="NAME=VALUE", help="A parameter; repeat for each (JSON or text)."),
    ] = None,
    as_json: JsonOpt = False,
) -> NoReturn:
    """Run skill NAME with the tools of --tools; prints its outputs as JSON (exit 1 if it failed)."""
    from ..skills import SkillTools

    if tools is None:
        _fail("skills run needs the tools the skill calls: pass --tools FILE.py[:NAME].")
    if db is None:
        _fail("Name the database of the skills: pass --db URL or set TOOLPLAN_DB.")
    try:
        registry = load_tools(tools)
    except CliInputError as exc:
        _fail(exc.message)
    params = _params(param or [])

    async def go(store: Store) -> dict[str, Any] | str:
        try:
            return await SkillTools(store, registry).skill_run(name, params)
        except ToolError as exc:
            return exc.message

    outcome = _with_store(db, go)
    if isinstance(outcome, str):
        if as_json:
            print_json(_out, {"ok": False, "error": outcome})
        else:
            say(_err, outcome, "red")
        raise typer.Exit(EXIT_FAILED)
    print_json(_out, {"ok": True, "outputs": outcome} if as_json else outcome)
    raise typer.Exit(EXIT_OK)
