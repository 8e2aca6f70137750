"""A pending approval outlives its process: stored, answered later by another process, nothing run twice.

The process asking on a terminal (``toolplan run --db ... --approve ask``) is killed with SIGKILL
while it waits for the answer; ``toolplan runs approve`` in a new process answers and finishes the
run. A run that returned waiting (no callback) is answered the same way.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toolplan
from toolplan import ApprovalRule, execute_plan
from toolplan.store import open_store

SRC = Path(toolplan.__file__).resolve().parents[1]

TOOLS = '''
import os

from toolplan import tool


def _record(name: str) -> None:
    with open(os.environ["APPROVAL_CALLS"], "a", encoding="utf-8") as f:
        f.write(name + "\\n")


@tool(read_only=True)
def look(key: str) -> str:
    """Read a value."""
    _record(f"look {key}")
    return f"value of {key}"


@tool(destructive=True)
def wipe(what: str) -> str:
    """Destroy something."""
    _record(f"wipe {what}")
    return f"wiped {what}"
'''

PLAN = {
    "steps": [
        {"id": "a", "tool": "look", "arguments": {"key": "x"}},
        {"id": "b", "tool": "look", "arguments": {"key": "y"}},
        # after b too: the kill -9 test kills while wipe is asked, and b must be stored by then (a step
        # still running when its process dies runs again on resume, as any unfinished step does)
        {"id": "w", "tool": "wipe", "arguments": {"what": "$ref:a"}, "depends_on": ["b"], "rationale": "start clean"},
        {"id": "after", "tool": "look", "arguments": {"key": "{{w}}"}},
    ]
}


def _setup(tmp_path: Path) -> tuple[Path, Path, str, dict[str, str]]:
    tools = tmp_path / "tools.py"
    tools.write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN), encoding="utf-8")
    calls = tmp_path / "calls.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPLAN_") and k != "FORCE_COLOR"}
    env.update({"PYTHONPATH": str(SRC), "APPROVAL_CALLS": str(calls)})
    return tools, plan, f"sqlite:///{tmp_path / 'runs.db'}", env


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _toolplan(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolplan", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill_9_while_asking_then_approve_from_another_process(tmp_path: Path) -> None:
    tools, plan, db, env = _setup(tmp_path)
    command = ["run", str(plan), "--tools", str(tools), "--db", db, "--run-id", "r1", "--approve", "ask"]
    with subprocess.Popen(
        [sys.executable, "-m", "toolplan", *command, "--approve", "destructive"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    ) as holder:
        try:
            assert holder.stderr is not None
            seen = []
            for line in holder.stderr:  # blocks until the process writes: the request is stored before it asks
                seen.append(line)
                if "wants to call wipe" in line:
                    break
            else:
                raise AssertionError("".join(seen))
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    assert sorted(_calls(tmp_path)) == ["look x", "look y"]

    refused = _toolplan(env, "runs", "resume", "r1", "--tools", str(tools), "--db", db)  # no rule: refused
    assert refused.returncode == 2 and "waits for a person's approval" in refused.stderr
    assert sorted(_calls(tmp_path)) == ["look x", "look y"]
    done = _toolplan(env, "runs", "approve", "r1", "--tools", str(tools), "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    steps = {s["id"]: s for s in json.loads(done.stdout)["steps"]}
    assert steps["w"]["output"] == "wiped value of x"
    assert steps["a"]["reused"] and steps["b"]["reused"]
    assert sorted(_calls(tmp_path)) == ["look wiped value of x", "look x", "look y", "wipe value of x"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_stored_waiting_run_is_rejected_from_the_command_line(tmp_path: Path) -> None:
    tools, _, db, env = _setup(tmp_path)
    os.environ["APPROVAL_CALLS"] = env["APPROVAL_CALLS"]
    try:
        sys.path.insert(0, str(tmp_path))
        tool_module = importlib.import_module("tools")  # the same tools, in this process

        async def first() -> str:
            store = open_store(db)
            try:
                result = await execute_plan(
                    PLAN,
                    [tool_module.look, tool_module.wipe],
                    store=store,
                    run_id="r2",
                    approval=ApprovalRule(destructive=True),
                )
            finally:
                await store.close()
            return result.status

        assert asyncio.run(first()) == "pending_approval"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tools", None)
        os.environ.pop("APPROVAL_CALLS", None)
    assert sorted(_calls(tmp_path)) == ["look x", "look y"]

    refused = _toolplan(env, "runs", "resume", "r2", "--tools", str(tools), "--db", db)
    assert refused.returncode == 2 and "waits for a person's approval" in refused.stderr
    wrong = _toolplan(env, "runs", "approve", "r2", "--tools", str(tools), "--db", db, "--step", "a")
    assert wrong.returncode == 2 and "does not wait for a" in wrong.stderr

    done = _toolplan(env, "runs", "approve", "r2", "--tools", str(tools), "--db", db, "--reject", "not now", "--json")
    assert done.returncode == 1, done.stderr
    steps = {s["id"]: s for s in json.loads(done.stdout)["steps"]}
    assert steps["w"]["status"] == "rejected" and "not now" in steps["w"]["error"]["message"]
    assert steps["after"]["status"] == "skipped"
    assert sorted(_calls(tmp_path)) == ["look x", "look y"]  # nothing ran twice, nothing destructive ran
