"""Listings (``runs list``, ``mcp tools``, ``keys list``, ``skills list``): ids are never cut."""

from __future__ import annotations

import io
import shlex
import sys
import textwrap
from pathlib import Path

import pytest
from cli_support import Cli, WritePlan
from rich.console import Console

from toolplan.cli._render import print_listing

LONG_ID = "sch_" + "0123456789abcdef" * 4 + "_17958504"  # 77 characters, as long as a schedule's run ids get


def test_runs_list_piped_is_plain_and_whole(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = str(write_plan([{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]))
    assert cli("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", LONG_ID).code == 0
    for columns in ("40", "80"):
        monkeypatch.setenv("COLUMNS", columns)  # the width a pipe gets: nothing may be cut to fit it
        listed = cli("runs", "list", "--db", db)
        assert listed.code == 0, listed.stderr
        header, row = listed.stdout.splitlines()
        assert header.split() == ["run", "id", "status", "steps", "ok", "calls", "created", "(UTC)", "updated", "(UTC)"]
        assert row.split()[:4] == [LONG_ID, "succeeded", "1/1", "1"]
        assert "…" not in listed.stdout and "│" not in listed.stdout


@pytest.mark.parametrize("width", [60, 100, 140])
def test_a_listing_on_a_terminal_keeps_its_ids_whole(width: int) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width, color_system=None)
    rows = [(LONG_ID, "succeeded", "a description long enough to have to give way to the id and the status")]
    print_listing(console, ("run id", "status", "description"), rows, whole=2)
    lines = buffer.getvalue().splitlines()
    assert lines[1].split()[:2] == [LONG_ID, "succeeded"], lines
    assert "…" not in buffer.getvalue()


def test_a_piped_listing_keeps_each_row_on_one_line() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=20, color_system=None)
    print_listing(console, ("name", "description"), [("x[bold]y", "two\nlines\tand a tab")])
    assert buffer.getvalue().splitlines() == ["name      description", "x[bold]y  two lines and a tab"]


SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("long", log_level="ERROR")


@server.tool()
def {name}(x: int) -> int:
    """Return x."""
    return x


server.run("stdio")
'''


@pytest.mark.slow  # a subprocess that starts an MCP server
def test_mcp_tools_piped_keeps_tool_names_whole(cli: Cli, tmp_path: Path) -> None:
    name = "a_tool_whose_name_is_long_enough_to_be_cut_in_80_columns_x"  # toolplan takes up to 64
    server = tmp_path / "server.py"
    server.write_text(textwrap.dedent(SERVER.format(name=name)), encoding="utf-8")
    listed = cli("mcp", "tools", "--stdio", shlex.join([sys.executable, str(server)]))
    assert listed.code == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(name))
    assert row.split()[0] == name
    assert "…" not in listed.stdout


def test_keys_create_no_approve_is_listed(cli: Cli, tmp_path: Path) -> None:
    import json

    db = f"sqlite:///{tmp_path / 'keys.db'}"
    made = cli("keys", "create", "bot", "--no-approve", "--db", db, "--json")
    assert made.code == 0, made.stderr
    assert json.loads(made.stdout)["can_approve"] is False
    assert cli("keys", "create", "alice", "--db", db).code == 0
    listed = json.loads(cli("keys", "list", "--db", db, "--json").stdout)
    assert {k["name"]: k["can_approve"] for k in listed} == {"bot": False, "alice": True}
    table = cli("keys", "list", "--db", db).stdout
    assert "approves" in table.splitlines()[0]
