"""Help, usage lines and entry points of the ``toolplan`` command (issue 15, item 13)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from cli_support import REPO
from rich.console import Console
from typer.testing import CliRunner

from toolplan.cli import app
from toolplan.cli._agent_demo import run_agent_demo

runner = CliRunner()


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args], prog_name="toolplan", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_dash_h_is_help(flag: str) -> None:
    text = _help(flag)
    assert text.startswith("Usage: toolplan [OPTIONS] COMMAND [ARGS]...")
    assert "-h, --help" in text
    assert "Usage: toolplan run " in _help("run", flag)


def test_command_summaries_are_whole_sentences() -> None:
    commands = _help("-h").split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    assert "..." not in commands and "…" not in commands
    summaries = dict(line.split(None, 1) for line in commands.splitlines())
    assert set(summaries) == {
        "agent",
        "run",
        "validate",
        "graph",
        "demo",
        "runs",
        "serve",
        "keys",
        "scheduler",
        "skills",
        "mcp",
        "audit",
    }
    assert all(s.endswith(".") for s in summaries.values()), summaries


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("run", "toolplan run PLAN.json --tools FILE.py[:NAME] [OPTIONS]"),
        ("validate", "toolplan validate PLAN.json [--tools FILE.py[:NAME]] [OPTIONS]"),
        ("graph", "toolplan graph PLAN.json [--tools FILE.py[:NAME]] [-o FILE] [OPTIONS]"),
        ("demo", "toolplan demo [--model PROVIDER:NAME]"),
        ("agent", "toolplan agent TASK --tools FILE.py[:NAME] [--model MODEL] [OPTIONS]"),
        ("runs list", "toolplan runs list --db URL [OPTIONS]"),
        ("runs show", "toolplan runs show RUN_ID --db URL [OPTIONS]"),
        ("runs resume", "toolplan runs resume RUN_ID --tools FILE.py[:NAME] --db URL [OPTIONS]"),
        ("runs work", "toolplan runs work --tools FILE.py[:NAME] --db URL [OPTIONS]"),
        ("serve", "toolplan serve --tools FILE.py[:NAME] --db URL [OPTIONS]"),
        ("keys create", "toolplan keys create NAME --db URL [OPTIONS]"),
        ("keys list", "toolplan keys list --db URL [OPTIONS]"),
        ("keys revoke", "toolplan keys revoke KEY_ID --db URL"),
        ("mcp tools", "toolplan mcp tools --stdio CMD | --url URL [OPTIONS]"),
        ("mcp serve", "toolplan mcp serve --tools FILE.py[:NAME] [OPTIONS]"),
        ("audit", "toolplan audit RUN_ID --db URL [OPTIONS]"),
        ("skills list", "toolplan skills list --db URL [OPTIONS]"),
        ("skills run", "toolplan skills run NAME --tools FILE.py[:NAME] --db URL [OPTIONS]"),
    ],
)
def test_usage_lines_read_as_typed(command: str, usage: str) -> None:
    text = _help(*command.split(), "-h")
    assert text.splitlines()[0] == f"Usage: {usage}"
    assert not re.search(r"<(str|int|float)>|\{PLAN", text), text


def test_python_dash_m_toolplan_is_the_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "toolplan", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("toolplan ")


def test_the_agent_demo_says_which_mode_runs_on_a_terminal() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=80, height=30, color_system=None)
    run_agent_demo(console)
    text = buffer.getvalue()
    for n, label in enumerate(("one call per turn", "parallel calls", "one plan"), start=1):
        assert f"Running the task: {label} ({n} of 3)" in text


def test_the_agent_demo_says_which_mode_runs_when_piped() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=80, color_system=None)
    run_agent_demo(console)
    lines = buffer.getvalue().splitlines()
    assert "Running: one call per turn (1 of 3)" in lines
    assert "Running: one plan (3 of 3)" in lines
    header = next(line for line in lines if line.startswith("mode "))
    assert re.split(r"\s*┃\s*", header) == ["mode", "requests", "tokens in", "tokens out", "tool calls", "wall time"]
    assert any(line.startswith("one call per turn ") for line in lines)  # the mode is not wrapped


DB_COMMANDS = [
    "run",
    "graph",
    "serve",
    "scheduler",
    "audit",
    "runs list",
    "runs show",
    "runs resume",
    "runs work",
    "keys create",
    "keys list",
    "keys revoke",
    "skills list",
    "skills run",
]


def _option_help(text: str, option: str) -> str:
    """The help of ``option`` in a command's help, on one line."""
    lines = text.split("Options:\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(option + " "))
    block = [lines[start].strip()[len(option) :]]
    for line in lines[start + 1 :]:
        if line.strip().startswith("-"):
            break
        block.append(line.strip())
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("command", DB_COMMANDS)
def test_each_db_option_says_what_the_command_does_with_it(command: str) -> None:
    helped = _option_help(_help(*command.split(), "-h"), "--db URL")
    assert ("Store the run" in helped) == (command == "run"), helped
    assert "a plain file path is a SQLite database" in helped and "Default: $TOOLPLAN_DB" in helped


def test_the_db_helps_differ_by_what_the_database_holds() -> None:
    helps = {c: _option_help(_help(*c.split(), "-h"), "--db URL") for c in DB_COMMANDS}
    assert len({h.split(" A URL")[0] for h in helps.values()}) >= 8, helps


def test_serve_shows_the_service_defaults() -> None:
    import inspect

    from toolplan.service import ServiceConfig, serve

    text = _help("serve", "-h")
    config, where = ServiceConfig(), inspect.signature(serve).parameters
    assert _option_help(text, "--slots N").startswith(f"Executions run at once here (default {config.slots}).")
    assert f"(default {config.max_active_per_key})." in _option_help(text, "--max-active-per-key N")
    assert f"(default {where['host'].default})." in _option_help(text, "--host ADDRESS")
    assert f"(default {where['port'].default})." in _option_help(text, "--port PORT")
