"""Conformance, oasis's tool layer: its built-in tool names, in a plan run from Python and from the CLI.

An oasis user names ``file_read``, ``file_stat``, ``data_parse``, ``data_aggregate`` ... and expects
them to exist, confined to a workspace. ``names="oasis"`` on the built-in toolsets offers them; a
tools file with those toolsets makes them available to ``toolplan run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from toolplan import execute_plan
from toolplan.builtin import DataTools, FileTools
from toolplan.cli import app

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "read", "tool": "file_read", "arguments": {"path": "sales.json"}},
        {"id": "rows", "tool": "data_parse", "arguments": {"text": "$ref:read.content"}},
        {
            "id": "totals",
            "tool": "data_aggregate",
            "arguments": {
                "data": "$ref:rows",
                "group_by": ["region"],
                "aggregates": {"total": {"op": "sum", "field": "amount"}},
            },
        },
        {"id": "stat", "tool": "file_stat", "arguments": {"path": "sales.json"}},
        {"id": "outside", "tool": "file_read", "arguments": {"path": "../secret.txt"}},
    ],
}
SALES = [{"region": "north", "amount": 10}, {"region": "south", "amount": 5}, {"region": "north", "amount": 2}]
TOTALS = [{"region": "north", "total": 12}, {"region": "south", "total": 5}]


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "sales.json").write_text(json.dumps(SALES), encoding="utf-8")  # data_parse reads JSON too
    (tmp_path / "secret.txt").write_text("not yours", encoding="utf-8")
    return root


async def test_a_plan_under_oasis_names_stays_in_its_workspace(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    result = await execute_plan(PLAN, [FileTools(root, names="oasis"), DataTools(names="oasis")])
    assert result.steps["totals"].output == TOTALS
    assert result.steps["stat"].output["size"] == len(json.dumps(SALES))
    outside = result.steps["outside"]
    assert outside.status == "failed" and outside.error is not None and "inside the workspace" in outside.error.message


def test_the_cli_runs_the_plan_with_a_tools_file_of_oasis_names(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    tools = tmp_path / "oasis_tools.py"
    tools.write_text(
        "from toolplan.builtin import DataTools, FileTools\n\n"
        f"tools = [FileTools({str(root)!r}, names='oasis'), DataTools(names='oasis')]\n",
        encoding="utf-8",
    )
    (tmp_path / "plan.json").write_text(json.dumps(PLAN), encoding="utf-8")
    args = ["run", str(tmp_path / "plan.json"), "--tools", f"{tools}:tools", "--json"]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    steps = {s["id"]: s for s in json.loads(done.stdout)["steps"]}
    assert steps["totals"]["status"] == "succeeded" and steps["outside"]["status"] == "failed"
    assert done.exit_code == 1
