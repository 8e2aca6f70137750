"""``--db``: which values name a database, and which commands may create one."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Calls, Cli, WritePlan
from typer.testing import CliRunner

from toolplan.cli import app

STEPS = [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]


def test_a_plain_path_is_a_sqlite_database(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    done = cli("run", str(write_plan(STEPS)), "--tools", str(tools_file), "--db", "runs.db", "--run-id", "bare")
    assert done.code == 0, done.stderr
    assert (tmp_path / "runs.db").is_file() and tool_calls() == ["add"]
    listed = cli("runs", "list", "--db", "runs.db", "--json")
    assert listed.code == 0 and [r["run_id"] for r in listed.json()] == ["bare"]
    assert cli("runs", "list", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--json").json() == listed.json()


def test_a_database_of_another_kind_is_an_error_before_the_run(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    done = cli("run", str(write_plan(STEPS)), "--tools", str(tools_file), "--db", "mysql://me@host/runs")
    assert done.code == 2 and tool_calls() == []
    assert done.stderr.startswith("Error: --db 'mysql://me@host/runs': toolplan stores in SQLite or PostgreSQL")
    assert "The run failed" not in done.stderr and "sqlite:///runs.db" in done.stderr


READ_ONLY = [
    ("runs", "list"),
    ("runs", "show", "r1"),
    ("runs", "resume", "r1", "--tools", "TOOLS"),
    ("audit", "r1"),
    ("graph", "--run-id", "r1"),
    ("keys", "list"),
    ("keys", "revoke", "k1"),
    ("skills", "list"),
    ("skills", "run", "s1", "--tools", "TOOLS"),
]


@pytest.mark.parametrize("form", ["url", "path"])
@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_a_reading_command_never_creates_a_database(
    args: tuple[str, ...], form: str, tools_file: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "typo.db"
    db = f"sqlite:///{missing}" if form == "url" else str(missing)
    argv = [str(tools_file) if a == "TOOLS" else a for a in args]
    result = CliRunner().invoke(app, [*argv, "--db", db])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: No database at {str(missing)!r}"), result.stderr
    assert "does not create one" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not missing.exists()


def test_a_writing_command_creates_its_database(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["keys", "create", "ci", "--db", str(tmp_path / "service.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "service.db").is_file()
    listed = CliRunner().invoke(app, ["keys", "list", "--db", str(tmp_path / "service.db"), "--json"])
    assert listed.exit_code == 0 and "ci" in listed.stdout
