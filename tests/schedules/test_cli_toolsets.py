"""Schedules and saved plans from a plan run by ``toolplan run``, as a user wires them in a tools file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # toolplan in subprocesses

TOOLS = """
from toolplan import tool
from toolplan.schedules import ScheduleTools
from toolplan.skills import SkillTools
from toolplan.store import open_store


@tool(read_only=True)
def count_orders(day: str) -> int:
    \"\"\"Count the orders of a day.\"\"\"
    return {"monday": 42}.get(day, 0)


store = open_store("sqlite:///runs.db")
skills = SkillTools(store, [count_orders])
TOOLS = [count_orders, ScheduleTools(store, [count_orders]), skills]
"""
COUNT = {"steps": [{"id": "n", "tool": "count_orders", "arguments": {"day": "{{params.day}}"}}]}


def _run(tmp_path: Path, name: str, plan: dict[str, Any]) -> dict[str, Any]:
    (tmp_path / name).write_text(json.dumps(plan), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "toolplan", "run", name, "--tools", "tools.py:TOOLS", "--json"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "Traceback" not in done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_a_plan_schedules_work_and_saves_a_skill_that_a_later_plan_runs(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    first = {
        "steps": [
            {"id": "save", "tool": "skill_create", "arguments": {
                "name": "orders_of", "description": "Orders of a day", "plan": COUNT,
                "parameters": {"day": {"type": "string"}},
            }},
            {"id": "daily", "tool": "schedule_create", "arguments": {
                "name": "daily orders", "when": "0 6 * * *", "timezone": "Europe/Paris",
                "plan": {"steps": [{"id": "n", "tool": "count_orders", "arguments": {"day": "monday"}}]},
            }},
            {"id": "never", "tool": "schedule_create", "arguments": {
                "name": "never", "when": "0 0 30 2 *",
                "plan": {"steps": [{"id": "n", "tool": "count_orders", "arguments": {"day": "monday"}}]},
            }},
            {"id": "listed", "tool": "schedule_list", "arguments": {}, "depends_on": ["daily"]},
        ]
    }  # fmt: skip
    result = _run(tmp_path, "first.json", first)
    assert result["status"] == "failed"  # the schedule that never fires is refused; its siblings ran
    assert result["outputs"]["save"]["name"] == "orders_of"
    assert result["outputs"]["daily"]["kind"] == "cron" and result["outputs"]["daily"]["timezone"] == "Europe/Paris"
    assert [s["name"] for s in result["outputs"]["listed"]] == ["daily orders"]
    never = next(step for step in result["steps"] if step["id"] == "never")
    assert never["error"]["kind"] == "business" and "never fires" in never["error"]["message"]

    # The next conversation: the saved plan is one step, its parameters checked before anything runs.
    later = {"steps": [{"id": "m", "tool": "skill:orders_of", "arguments": {"day": "monday"}}]}
    assert _run(tmp_path, "later.json", later)["outputs"] == {"m": {"n": 42}}
    wrong = {"steps": [{"id": "m", "tool": "skill:orders_of", "arguments": {"weekday": "monday"}}]}
    refused = _run(tmp_path, "wrong.json", wrong)
    assert refused["status"] == "invalid"
