"""``toolplan run --db`` and ``toolplan runs``: durable runs from the shell, with real SQLite files."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from cli_support import Calls, Cli, WritePlan

STEPS = [
    {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
    {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
    {"id": "f", "tool": "fail", "arguments": {"message": "no"}},
]


def test_a_durable_run_prints_its_id_first_and_a_second_run_reuses_everything(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    plan = write_plan(STEPS)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = cli("run", str(plan), "--tools", str(tools_file), "--db", db, "--run-id", "r1")
    assert first.code == 1  # f fails
    assert first.stderr.startswith("Run r1 is stored in")
    assert "--run-id r1 to resume it" in first.stderr
    assert sorted(tool_calls()) == ["add", "add", "fail"]
    second = cli("run", str(plan), "--tools", str(tools_file), "--db", db, "--run-id", "r1", "--json")
    assert second.code == 1 and sorted(tool_calls()) == ["add", "add", "fail"]  # nothing called again
    data = second.json()
    assert [s["reused"] for s in data["steps"]] == [True, True, True]
    assert data["outputs"] == {"a": 3, "b": 13}


def test_runs_list_and_show(cli: Cli, tools_file: Path, write_plan: WritePlan, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    cli("run", str(write_plan(STEPS[:2])), "--tools", str(tools_file), "--db", db, "--run-id", "ok-run")
    listed = cli("runs", "list", "--db", db, "--json")
    assert listed.code == 0
    (summary,) = listed.json()
    assert summary["run_id"] == "ok-run" and summary["status"] == "succeeded" and summary["steps"] == 2
    shown = cli("runs", "show", "ok-run", "--db", db)
    assert shown.code == 0
    assert shown.stdout.splitlines()[0].startswith("Run ok-run: succeeded; created ")
    assert "Plan succeeded: 2 succeeded" in shown.stdout
    as_json = cli("runs", "show", "ok-run", "--db", db, "--json").json()
    assert as_json["result"]["outputs"] == {"b": 13} or as_json["result"]["outputs"] == {"a": 3, "b": 13}
    table = cli("runs", "list", "--db", db)
    assert "ok-run" in table.stdout and "2/2" in table.stdout


def test_inputs_that_cannot_work_are_one_line_errors(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = str(write_plan(STEPS[:1]))
    assert cli("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", "made").code == 0  # the database exists
    cases = [
        (("runs", "show", "nope", "--db", db), "No run 'nope' is stored here"),
        (("runs", "list"), "pass --db URL"),
        (("runs", "list", "--db", "mysql://x@y/z"), "SQLite or PostgreSQL"),
        (("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", "bad id"), "--run-id 'bad id' is not valid"),
        (("run", plan, "--tools", str(tools_file), "--rerun-unknown"), "--rerun-unknown applies when resuming"),
        (("runs", "resume", "nope", "--tools", str(tools_file), "--db", db), "No run 'nope' is stored here"),
    ]
    for args, message in cases:
        done = cli(*args)
        assert done.code == 2, (args, done.stderr)
        assert done.stderr.startswith("Error: ") and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    other = write_plan([{"id": "z", "tool": "add", "arguments": {"a": 0, "b": 0}}], name="other.json")
    cli("run", plan, "--tools", str(tools_file), "--db", db, "--run-id", "taken")
    clash = cli("run", str(other), "--tools", str(tools_file), "--db", db, "--run-id", "taken")
    assert clash.code == 2 and "was stored with another plan" in clash.stderr


def test_a_worker_runs_submitted_runs(cli: Cli, tools_file: Path, tool_calls: Calls, tmp_path: Path) -> None:
    import asyncio

    from toolplan.store import open_store

    db = f"sqlite:///{tmp_path / 'runs.db'}"

    async def submit() -> list[str]:
        async with open_store(db) as store:
            return [
                await store.submit({"steps": [{"id": "a", "tool": "add", "arguments": {"a": i, "b": 1}}]})
                for i in range(3)
            ]

    ids = asyncio.run(submit())
    done = cli("runs", "work", "--tools", str(tools_file), "--db", db)
    assert done.code == 0, done.stderr
    assert sorted(line.split(":")[0] for line in done.stdout.splitlines()) == sorted(ids)
    assert "ran 3" in done.stderr and tool_calls() == ["add", "add", "add"]
    again = cli("runs", "work", "--tools", str(tools_file), "--db", db)
    assert "ran 0" in again.stderr


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL: a SQLite file, then a PostgreSQL database of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _cut_while_echo_runs(db: str, plan: dict[str, Any]) -> None:
    """Run ``plan`` as run ``cut`` in this process and cancel it while its ``echo`` call is in flight."""
    import asyncio

    from toolplan import execute_plan, tool
    from toolplan.store import open_store

    async def cut() -> None:
        entered = asyncio.Event()

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        @tool
        async def echo(value: Any) -> Any:
            """Hang until cancelled."""
            entered.set()
            await asyncio.Event().wait()
            return value

        async with open_store(db) as store:
            task = asyncio.create_task(execute_plan(plan, [add, echo], store=store, run_id="cut"))
            await entered.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(cut())


def test_runs_show_marks_the_steps_a_resume_reused(cli: Cli, tools_file: Path, tool_calls: Calls, any_db: str) -> None:
    plan: dict[str, Any] = {
        "steps": [
            {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "e", "tool": "echo", "arguments": {"value": "$ref:a"}},
            {"id": "b", "tool": "add", "arguments": {"a": "$ref:e", "b": 10}},
        ]
    }
    _cut_while_echo_runs(any_db, plan)
    before = cli("runs", "show", "cut", "--db", any_db, "--json").json()
    assert [s.get("reused", False) for s in before["result"]["steps"]] == [False, False, False]
    resumed = cli("runs", "resume", "cut", "--tools", str(tools_file), "--db", any_db, "--rerun-unknown")
    assert resumed.code == 0, resumed.stderr
    assert tool_calls() == ["echo", "add"]  # a ended before the resume: not called again
    shown = cli("runs", "show", "cut", "--db", any_db, "--json")
    assert shown.code == 0 and shown.json()["status"] == "succeeded"
    steps = {s["id"]: s for s in shown.json()["result"]["steps"]}
    assert {sid: s.get("reused", False) for sid, s in steps.items()} == {"a": True, "e": False, "b": False}
    assert steps["b"]["output"] == 13 and steps["a"]["attempts"] == 1
    table = cli("runs", "show", "cut", "--db", any_db)
    rows = {line.split()[0]: line for line in table.stdout.splitlines() if line.split()[:1] in (["a"], ["e"], ["b"])}
    assert "reused" in rows["a"] and "reused" not in rows["e"] and "reused" not in rows["b"], table.stdout
    assert "(1 reused from the store, not run again)" in table.stdout
