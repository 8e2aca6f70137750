"""``toolplan run`` end to end, in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import Calls, Cli, WritePlan

STEP_FIELDS = {"id", "tool", "status", "output", "error", "attempts", "started_at", "ended_at"}


def test_success_json_shape(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(
        [
            {"id": "one", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "two", "tool": "add", "arguments": '{"a": 10, "b": 20}'},
            {"id": "sum", "tool": "add", "arguments": {"a": "$ref:one", "b": "$ref:two"}},
            {"id": "text", "tool": "echo", "arguments": {"value": "total={{sum}}"}},
        ],
        output_steps=["sum", "text"],
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert {"status", "outputs", "steps"} <= set(data)
    assert data["status"] == "succeeded"
    assert data["outputs"] == {"sum": 33, "text": "total=33"}
    assert [s["id"] for s in data["steps"]] == ["one", "two", "sum", "text"]
    for step in data["steps"]:
        assert set(step) >= STEP_FIELDS
        assert step["status"] == "succeeded"
        assert step["error"] is None
        assert step["attempts"] == 1
        assert step["started_at"] <= step["ended_at"]
    assert sorted(tool_calls()) == ["add", "add", "add", "echo"]


def test_failures_exit_1(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "bad", "tool": "fail", "arguments": {"message": "city not found"}},
            {"id": "after", "tool": "echo", "arguments": {"value": "$ref:bad"}},
            {"id": "fine", "tool": "add", "arguments": {"a": 1, "b": 1}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 1, r.stderr
    data = r.json()
    assert data["status"] == "failed"
    steps = {s["id"]: s for s in data["steps"]}
    assert steps["bad"]["status"] == "failed"
    assert steps["bad"]["error"] == {"kind": "business", "message": "city not found"}
    assert steps["after"]["status"] == "skipped"
    assert steps["fine"]["status"] == "succeeded"
    assert data["outputs"] == {"fine": 2}


def test_invalid_plan_json_runs_no_tool(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(
        [
            {"id": "ok", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "typo", "tool": "ad", "arguments": {"a": 1, "b": 2}},
            {"id": "ref", "tool": "echo", "arguments": {"value": "$ref:nowhere"}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 2
    data = r.json()
    assert data["status"] == "invalid"
    assert {"unknown_tool", "unknown_reference"} <= {e["code"] for e in data["errors"]}
    for error in data["errors"]:
        assert set(error) == {"code", "step", "message"}
    assert tool_calls() == []


def test_invalid_plan_readable(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan([{"id": "s1", "tool": "add", "arguments": {"a": "$ref:s2"}}, {"id": "s2", "tool": "nope"}])
    r = cli("run", str(plan), "--tools", str(tools_file))
    assert r.code == 2
    assert "The plan is invalid" in r.stderr
    assert "[unknown_tool] step 's2'" in r.stderr
    assert "Traceback" not in r.stderr
    assert tool_calls() == []


def test_human_output(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "s1", "tool": "add", "arguments": {"a": 2, "b": 3}},
            {"id": "s2", "tool": "fail", "arguments": {"message": "no luck"}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file))
    assert r.code == 1
    assert "s1" in r.stdout and "succeeded" in r.stdout
    assert "no luck" in r.stdout
    assert "Plan failed: 1 succeeded, 1 failed" in r.stdout


def test_plan_from_stdin(cli: Cli, tools_file: Path) -> None:
    plan = {"steps": [{"id": "s1", "tool": "add", "arguments": {"a": 4, "b": 5}}]}
    r = cli("run", "-", "--tools", str(tools_file), "--json", input=json.dumps(plan))
    assert r.code == 0, r.stderr
    assert r.json()["outputs"] == {"s1": 9}


@pytest.mark.parametrize(
    ("name", "tool"),
    [("ALL", "add"), ("BY_NAME", "plus")],
    ids=["list", "dict"],
)
def test_tools_by_name(cli: Cli, tools_file: Path, write_plan: WritePlan, name: str, tool: str) -> None:
    plan = write_plan([{"id": "s1", "tool": tool, "arguments": {"a": 1, "b": 1}}])
    r = cli("run", str(plan), "--tools", f"{tools_file}:{name}", "--json")
    assert r.code == 0, r.stderr
    assert r.json()["outputs"] == {"s1": 2}


def test_named_dict_hides_other_tools(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan([{"id": "s1", "tool": "add", "arguments": {"a": 1, "b": 1}}])
    r = cli("run", str(plan), "--tools", f"{tools_file}:BY_NAME", "--json")
    assert r.code == 2
    (error,) = r.json()["errors"]
    assert error["code"] == "unknown_tool"
    assert "plus" in error["message"]
    assert tool_calls() == []


def test_discovery_skips_imported_and_private(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "s1", "tool": "double", "arguments": {"x": 1}},
            {"id": "s2", "tool": "_record", "arguments": {"name": "x"}},
        ]
    )
    r = cli("validate", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 2
    data = r.json()
    assert [e["code"] for e in data["errors"]] == ["unknown_tool", "unknown_tool"]
    assert "Known tools: add, echo, fail, hang, noisy." in data["errors"][0]["message"]


def test_fail_fast(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "bad", "tool": "fail", "arguments": {"message": "stop"}},
            {"id": "stuck", "tool": "hang", "arguments": {"label": "x"}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--fail-fast")
    assert r.code == 1
    steps = {s["id"]: s["status"] for s in r.json()["steps"]}
    assert steps["bad"] == "failed"
    assert steps["stuck"] in ("cancelled", "not_run")


def test_step_timeout(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "stuck", "tool": "hang", "arguments": {"label": "x"}},
            {"id": "fine", "tool": "add", "arguments": {"a": 1, "b": 1}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--step-timeout", "0.2")
    assert r.code == 1
    steps = {s["id"]: s for s in r.json()["steps"]}
    assert steps["stuck"]["status"] == "timed_out"
    assert steps["stuck"]["error"]["kind"] == "timeout"
    assert steps["fine"]["status"] == "succeeded"


def test_plan_timeout(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan(
        [
            {"id": "stuck", "tool": "hang", "arguments": {"label": "x"}},
            {"id": "later", "tool": "echo", "arguments": {"value": "$ref:stuck"}},
        ]
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--timeout", "0.2", "--max-concurrency", "1")
    assert r.code == 1
    steps = {s["id"]: s["status"] for s in r.json()["steps"]}
    assert steps == {"stuck": "timed_out", "later": "not_run"}


def test_batch_dialect(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan([{"tool": "add", "args": {"a": 1, "b": 2}}, {"tool": "echo", "args": {"value": "$ref:0"}}])
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--dialect", "batch")
    assert r.code == 0, r.stderr
    assert r.json()["outputs"] == {"0": 3, "1": "$ref:0"}  # no data flow in a batch


def test_max_steps(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan([{"id": f"s{i}", "tool": "add", "arguments": {"a": i, "b": i}} for i in range(3)])
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--max-steps", "2")
    assert r.code == 2
    assert [e["code"] for e in r.json()["errors"]] == ["too_many_steps"]
    assert tool_calls() == []


def test_json_stdout_stays_clean_when_tools_print(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    plan = write_plan([{"id": "s1", "tool": "noisy", "arguments": {"text": "hi"}}])
    r = cli("run", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 0, r.stderr
    assert r.json()["outputs"] == {"s1": "hi"}
    assert "noise from a tool" in r.stderr


def _plan_data(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps)})


def test_warnings_do_not_block(cli: Cli, tools_file: Path) -> None:
    plan = _plan_data({"id": "s1", "tool": "echo", "arguments": {"value": "{{ name }}"}, "colour": "red"})
    r = cli("run", "-", "--tools", str(tools_file), input=plan)
    assert r.code == 0, r.stderr
    assert "Warnings:" in r.stderr
    assert "[unknown_field]" in r.stderr


def test_a_timed_out_sync_tool_does_not_keep_the_cli_open(cli: Cli, tmp_path: Path, write_plan: WritePlan) -> None:
    # The abandoned function goes on in its thread (Python cannot stop it), but the process exits as
    # soon as the run is over: the cli fixture's 60 s limit would fail this before the sleep ends.
    (tmp_path / "slow_tools.py").write_text(
        "import time\n\n\ndef nap(seconds: float) -> str:\n    time.sleep(seconds)\n    return 'woke'\n",
        encoding="utf-8",
    )
    plan = write_plan([{"id": "nap", "tool": "nap", "arguments": {"seconds": 300}}])
    r = cli("run", str(plan), "--tools", str(tmp_path / "slow_tools.py"), "--step-timeout", "0.2", "--json")
    assert r.code == 1, r.stderr
    step = r.json()["steps"][0]
    assert step["status"] == "timed_out"
    assert "still running in its worker thread" in step["error"]["message"]


def test_a_reused_run_shows_no_parallelism(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    plan = str(write_plan([{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = cli("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", "r1")
    assert first.code == 0 and "(parallelism " in first.stdout
    again = cli("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", "r1")
    assert again.code == 0 and tool_calls() == ["add"]
    assert "1 reused from the store" in again.stdout
    assert "parallelism" not in again.stdout, again.stdout


def test_reading_a_plan_from_a_terminal_says_so(tools_file: Path, tmp_path: Path) -> None:
    """``run -`` with stdin on a terminal tells the user it waits for the plan, then runs what they type."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    main_fd, side_fd = pty.openpty()
    env = {**os.environ, "TOOLPLAN_TEST_CALLS": str(tmp_path / "calls.txt")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolplan.cli", "run", "-", "--tools", str(tools_file), "--json"],
        stdin=side_fd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    os.close(side_fd)
    try:
        assert proc.stderr is not None
        said = b""
        deadline = time.monotonic() + 60
        while b"Ctrl-D" not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                said += os.read(proc.stderr.fileno(), 4096)
        assert said.startswith(b"Reading the plan from standard input"), said
        plan = json.dumps({"steps": [{"id": "a", "tool": "add", "arguments": {"a": 2, "b": 3}}]})
        os.write(main_fd, plan.encode() + b"\n\x04")  # then Ctrl-D: the end of the input
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main_fd)
    assert proc.returncode == 0, said
    assert json.loads(stdout)["outputs"] == {"a": 5}
