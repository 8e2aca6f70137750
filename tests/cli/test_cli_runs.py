"""``toolplan run --db`` and ``toolplan runs``: durable runs from the shell, with real SQLite files."""

from __future__ import annotations

from pathlib import Path

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
