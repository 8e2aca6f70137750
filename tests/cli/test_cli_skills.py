"""``toolplan skills``: errors read like every other command's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cli_support import Calls, Cli

from toolplan.skills import SkillTools
from toolplan.store import open_store


@pytest.fixture
def skills_db(tmp_path: Path) -> str:
    """A database with skill ``double`` (add x to itself), saved over the test tools."""
    db = f"sqlite:///{tmp_path / 'skills.db'}"

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async def save() -> None:
        async with open_store(db) as store:
            plan = {"steps": [{"id": "sum", "tool": "add", "arguments": {"a": "{{params.x}}", "b": "{{params.x}}"}}]}
            params = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
            await SkillTools(store, [add]).skill_create("double", "Double a number.", plan, params)

    asyncio.run(save())
    return db


def test_a_skill_runs(cli: Cli, tools_file: Path, skills_db: str, tool_calls: Calls) -> None:
    done = cli("skills", "run", "double", "--tools", str(tools_file), "--db", skills_db, "-p", "x=4")
    assert done.code == 0, done.stderr
    assert done.json() == {"sum": 8} and tool_calls() == ["add"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope",), "Error: No skill named 'nope'"),
        (("double", "-p", "y=1"), "Error: Skill 'double' cannot run with these parameters"),
    ],
)
def test_a_skill_that_cannot_run_is_an_error_line(
    cli: Cli, tools_file: Path, skills_db: str, tool_calls: Calls, args: tuple[str, ...], message: str
) -> None:
    done = cli("skills", "run", *args, "--tools", str(tools_file), "--db", skills_db)
    assert done.code == 2, done.stderr
    assert done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert tool_calls() == []
