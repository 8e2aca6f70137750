"""``toolplan run --dry-run``, in a subprocess: the report as a table and as JSON; no tool is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Calls, Cli, WritePlan

STEPS = [
    {"id": "one", "tool": "add", "arguments": {"a": 1, "b": 2}},
    {"id": "two", "tool": "echo", "arguments": {"value": "$ref:one"}},
    {"id": "bad", "tool": "fail", "arguments": {"message": "no"}, "depends_on": ["one"]},
]


def test_json_report_and_no_call(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(STEPS, budget={"max_tool_calls": 2})
    r = cli("run", str(plan), "--tools", str(tools_file), "--dry-run", "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["dry_run"] is True and data["waves"] == [["one"], ["two", "bad"]]
    assert [s["tool"] for s in data["steps"]] == ["add", "echo", "fail"]
    assert data["budget"]["calls"] == 3 and data["budget"]["over"] == ["up to 3 calls, over max_tool_calls=2"]
    assert tool_calls() == []


def test_table_and_stored_latencies(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    plan = write_plan(STEPS[:2])
    db = str(tmp_path / "runs.db")
    missing = cli("run", str(plan), "--tools", str(tools_file), "--dry-run", "--db", db)
    assert missing.code == 2 and "does not create one" in missing.stderr  # a dry run only reads
    assert cli("run", str(plan), "--tools", str(tools_file), "--db", db, "--json").code == 0  # a real run
    assert sorted(tool_calls()) == ["add", "echo"]
    r = cli("run", str(plan), "--tools", str(tools_file), "--dry-run", "--db", db)
    assert r.code == 0, r.stderr
    assert "Dry run: nothing was called. 2 steps in 2 waves." in r.stdout
    assert "Critical path: one -> two" in r.stdout
    assert "Budget, worst case (every retry and fallback): 2 calls, cost 2 (no limits)." in r.stdout
    assert "Expected duration: " in r.stdout and "the critical path, by the mean latency" in r.stdout
    assert "Arguments (* holds references, filled in when the step runs):" in r.stdout
    assert '  two: {"value":"$ref:one"} *' in r.stdout
    assert sorted(tool_calls()) == ["add", "echo"]  # still only the real run's calls


def test_options_of_a_real_run_are_refused(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(STEPS)
    r = cli("run", str(plan), "--tools", str(tools_file), "--dry-run", "--run-id", "r1", "--ui")
    assert r.code == 2 and "--dry-run calls no tool, so --ui, --run-id would do nothing" in r.stderr


def test_an_invalid_plan_is_reported_as_without_dry_run(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan([{"id": "a", "tool": "nope", "arguments": {}}])
    r = cli("run", str(plan), "--tools", str(tools_file), "--dry-run")
    assert r.code == 2 and "nope" in r.stderr


GROUP_TOOLS = """
from toolplan import ToolError, ToolRegistry, tool


@tool(read_only=True)
def broken(query: str) -> str:
    \"\"\"Down.\"\"\"
    raise ToolError("down")


@tool(read_only=True)
def working(query: str) -> str:
    \"\"\"Up.\"\"\"
    return "found"


TOOLS = ToolRegistry([broken, working])
TOOLS.add_group("search", ["broken", "working"])
"""


@pytest.mark.slow  # several processes
def test_a_strategy_learns_across_runs_of_the_command_only_with_a_database(cli: Cli, tmp_path: Path) -> None:
    tools = tmp_path / "group_tools.py"
    tools.write_text(GROUP_TOOLS, encoding="utf-8")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"policy": "greedy", "steps": [{"id": "s", "tool": "search", "arguments": {"query": "q"}}]}),
        encoding="utf-8",
    )
    spec = f"{tools}:TOOLS"
    alone = cli("run", str(plan), "--tools", spec)
    assert alone.code == 1 and "policy_not_kept" in alone.stderr  # greedy tries 'broken' first, and forgets
    db = str(tmp_path / "runs.db")
    first = cli("run", str(plan), "--tools", spec, "--db", db, "--json")
    assert first.code == 1 and first.json()["choices"][0]["chosen"] == "broken"
    assert "policy_not_kept" not in first.stderr
    second = cli("run", str(plan), "--tools", spec, "--db", db, "--json")
    assert second.code == 0 and second.json()["choices"][0]["chosen"] == "working"  # untried, then the best
    third = cli("run", str(plan), "--tools", spec, "--db", db, "--json")
    assert third.json()["choices"][0]["chosen"] == "working"
