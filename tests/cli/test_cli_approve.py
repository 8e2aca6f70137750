"""``toolplan run --approve``: a person answers on the terminal (a real subprocess, stdin piped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import Calls, Cli, WritePlan

STEPS = [
    {"id": "one", "tool": "add", "arguments": {"a": 1, "b": 2}, "rationale": "the first sum"},
    {"id": "two", "tool": "echo", "arguments": {"value": "$ref:one"}},
    {"id": "three", "tool": "add", "arguments": {"a": 5, "b": 5}},
    {"id": "four", "tool": "echo", "arguments": {"value": "$ref:three"}},
]


def test_approve_and_reject_on_the_terminal(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    plan = write_plan(STEPS)
    r = cli(
        "run", str(plan), "--tools", str(tools_file), "--json", "--approve", "ask", "--approve", "tool:add",
        input="y\nn too big\n",
    )  # fmt: skip
    assert r.code == 1, r.stderr
    data = r.json()
    steps = {s["id"]: s for s in data["steps"]}
    assert steps["one"]["status"] == "succeeded"
    assert steps["two"]["output"] == 3
    assert steps["three"]["status"] == "rejected"
    assert "too big" in steps["three"]["error"]["message"]
    assert steps["four"]["status"] == "skipped"
    assert sorted(tool_calls()) == ["add", "echo"]
    assert "Step 'one' wants to call add" in r.stderr
    assert "why: the first sum" in r.stderr
    assert "skipped if rejected: four" in r.stderr


def test_all_approves_the_rest_and_closed_stdin_rejects(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    plan = write_plan(STEPS)
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--approve", "ask", input="a\n")
    assert r.code == 0, r.stderr
    assert sorted(tool_calls()) == ["add", "add", "echo", "echo"]

    r = cli(
        "run", str(plan), "--tools", str(tools_file), "--json", "--approve", "ask", "--approve", "tool:add", input=""
    )
    assert r.code == 1, r.stderr
    steps = {s["id"]: s for s in r.json()["steps"]}
    assert steps["one"]["status"] == "rejected" and "stdin closed" in steps["one"]["error"]["message"]


def test_approve_options_are_checked(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(STEPS)
    r = cli("run", str(plan), "--tools", str(tools_file), "--approve", "sometimes")
    assert r.code == 2 and "--approve 'sometimes' is not known" in r.stderr
    r = cli("run", str(plan), "--tools", str(tools_file), "--approve", "destructive")
    assert r.code == 2 and "add --approve ask" in r.stderr and "--db" in r.stderr
    r = cli("run", str(plan), "--tools", str(tools_file), "--approve", "ask", "--approve-timeout", "-1")
    assert r.code == 2 and "--approve-timeout" in r.stderr
    assert tool_calls() == []


def test_a_stored_run_waits_and_runs_approve_answers_it(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    plan = write_plan(STEPS)
    db = str(tmp_path / "runs.db")
    args = ("--tools", str(tools_file), "--db", db)
    r = cli("run", str(plan), *args, "--run-id", "w1", "--approve", "tool:add")
    assert r.code == 1, r.stderr
    assert "Plan pending_approval" in r.stdout
    assert "Waiting for approval: one, three. Answer with: toolplan runs approve w1" in r.stdout
    assert tool_calls() == []
    r = cli("runs", "approve", "w1", *args, "--step", "one", "--json")
    assert r.code == 1, r.stderr
    data = r.json()
    assert data["status"] == "pending_approval"
    assert {s["id"]: s["status"] for s in data["steps"]}["two"] == "succeeded"
    r = cli("runs", "approve", "w1", *args, "--reject", "no")
    assert r.code == 1, r.stderr
    assert "rejected" in r.stdout
    assert sorted(tool_calls()) == ["add", "echo"]


def test_an_unanswered_prompt_times_out_and_the_process_ends(
    tools_file: Path, write_plan: WritePlan, tool_calls: Calls, calls_file: Path, tmp_path: Path
) -> None:
    plan = write_plan(STEPS[:2])
    env = {**os.environ, "TOOLPLAN_TEST_CALLS": str(calls_file)}
    env.pop("FORCE_COLOR", None)
    out = tmp_path / "out.json"
    args = ["run", str(plan), "--tools", str(tools_file), "--json", "--approve", "ask", "--approve-timeout", "0.2"]
    # stdin stays open and nobody answers: the step times out and the process exits all the same
    with (
        out.open("w", encoding="utf-8") as sink,
        subprocess.Popen(
            [sys.executable, "-m", "toolplan.cli", *args],
            stdin=subprocess.PIPE,
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
        ) as proc,
    ):
        assert proc.wait(timeout=60) == 1
    steps = {s["id"]: s for s in json.loads(out.read_text(encoding="utf-8"))["steps"]}
    assert steps["one"]["status"] == "rejected" and "approval timed out" in steps["one"]["error"]["message"]
    assert tool_calls() == []
