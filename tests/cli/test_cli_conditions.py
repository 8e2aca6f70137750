"""``toolplan run`` with conditional steps and computed arguments, in both dialects that take them."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import Calls, Cli


def test_a_chaining_plan_with_a_condition_and_a_computed_argument(
    cli: Cli, tools_file: Path, tmp_path: Path, tool_calls: Calls
) -> None:
    plan = {
        "tools": [
            {"name": "echo", "parameters": {"value": {"created": True, "id": 7}}},
            {
                "name": "add",
                "parameters": {"a": "{{echo.id}}", "b": {"$op": "*", "args": ["{{echo.id}}", 2]}},
                "dependsOn": "echo",
                "when": "{{echo.created}}",
            },
            {
                "name": "fail",
                "parameters": {"message": "not created"},
                "dependsOn": "echo",
                "when": {"$op": "not", "args": ["{{echo.created}}"]},
            },
        ],
        "executionOrder": ["echo", "add", "fail"],
    }
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    r = cli("run", str(path), "--tools", str(tools_file), "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["status"] == "succeeded"
    steps = {s["id"]: s for s in data["steps"]}
    assert steps["add"]["output"] == 21
    assert steps["fail"]["status"] == "skipped"
    assert steps["fail"]["error"]["kind"] == "condition"
    assert steps["fail"]["error"]["message"].startswith("Condition false: not({{echo.created}})")
    assert sorted(tool_calls()) == ["add", "echo"]


def test_an_invalid_expression_is_refused_before_any_tool_runs(
    cli: Cli, tools_file: Path, tmp_path: Path, tool_calls: Calls
) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "arguments": {"value": 1}},
            {"id": "b", "tool": "add", "arguments": {"a": 1, "b": {"$op": "+", "args": ["$ref:a", "x"]}}},
        ]
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    r = cli("run", str(path), "--tools", str(tools_file), "--json")
    assert r.code != 0
    assert "invalid_expression" in r.stdout + r.stderr
    assert tool_calls() == []
