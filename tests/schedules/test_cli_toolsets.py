"""Schedules and saved plans from a plan run by ``toolplan run``, as a user wires them in a tools file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from schedules_support import serving

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
SAVE = {  # a step that saves COUNT as the skill orders_of(day)
    "id": "save",
    "tool": "skill_create",
    "arguments": {
        "name": "orders_of",
        "description": "Orders of a day",
        "plan": COUNT,
        "parameters": {"day": {"type": "string"}},
    },
}


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
            SAVE,
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


def _served_skill_run(tmp_path: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """Run ``plan`` through a real `toolplan serve` on the same tools file; the execution's view."""
    key = "tp_test_key_for_skills_0123456789"
    (tmp_path / "keys.txt").write_text(f"{key}\n", encoding="utf-8")
    args = ("--tools", "tools.py:TOOLS", "--db", "sqlite:///svc.db", "--api-key-file", "keys.txt", "--no-scheduler")
    with (
        serving(tmp_path, *args) as (server, port),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": key}, timeout=30) as c,
    ):
        for _ in range(600):  # up to a minute to import and bind
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if c.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                threading.Event().wait(0.1)
        r = c.post("/v1/plans", json={"plan": plan})
        assert r.status_code == 201, r.text
        done = c.post(f"/v1/plans/{r.json()['plan_id']}/executions", params={"wait": 30})
        assert done.status_code in (200, 201), done.text
        body: dict[str, Any] = done.json()
        return body


def test_toolplan_serve_runs_the_saved_plans_of_its_tools_file(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    assert _run(tmp_path, "save.json", {"steps": [SAVE]})["status"] == "succeeded"
    later = {"steps": [{"id": "m", "tool": "skill:orders_of", "arguments": {"day": "monday"}}]}
    body = _served_skill_run(tmp_path, later)
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"m": {"n": 42}}
