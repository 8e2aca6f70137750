"""Fault points (``TOOLPLAN_FAULTS``) on SQLite: a durable run dies by SIGKILL at a named point, then resumes.

Each plan is a chain ``s0 -> s1 -> s2`` (each step reads the one before), so the Nth time a point is
passed names one step. The first process must die with SIGKILL (returncode -9); ``toolplan runs
resume`` then finishes the run, and the ledger and the stored outcome say what the resume rule promises:

- ``after_claim``: the step's ``running`` row committed, its tool not called: a non-idempotent step
  ends ``unknown_outcome`` without ever having been called; an idempotent or read-only one is called
  (once, attempt 2, same key);
- ``after_call``: the tool ran, its result did not commit: a non-idempotent step ends
  ``unknown_outcome`` (called once: its effect happened); an idempotent or read-only one is called
  again with the same idempotency key (attempts 1 and 2; the upserted effect is still one row);
- ``after_commit``: the result committed: the step is reused, not called again (a non-idempotent
  dependent whose ``running`` row committed in the same transaction ends ``unknown_outcome``,
  never called: the kill came before its call);
- ``commit_error=N``: the Nth commit fails once; the store retries it and the run succeeds in one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from durable_support import (
    TOOLS,
    Ledger,
    Procs,
    chain_plan,
    check_run,
    read_run,
    toolplan_args,
    toolplan_env,
    write_plan,
)

# A step's expected end: its status and the attempts of the calls the ledger holds for it.
Expected = dict[str, tuple[str, list[int]]]


def _crash_and_resume(tmp_path: Path, tools: Sequence[str], fault: str) -> tuple[Ledger, int, str]:
    """Run the chain of ``tools`` with ``fault``; it must die by SIGKILL; resume it; the resume's exit code."""
    plan = chain_plan(tools)
    plan_path = write_plan(tmp_path / "plan.json", plan)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = Ledger(tmp_path / "ledger.db")
    run_id = "faults-1"
    with Procs(tmp_path / "logs") as procs:
        first = procs.start(
            toolplan_args("run", str(plan_path), "--tools", str(TOOLS), "--db", url, "--run-id", run_id),
            toolplan_env(ledger.path, TOOLPLAN_FAULTS=fault),
            "faulty",
        )
        assert first.wait(60) == -9, first.describe()
        again = procs.start(
            toolplan_args("runs", "resume", run_id, "--tools", str(TOOLS), "--db", url),
            toolplan_env(ledger.path),
            "resume",
        )
        code = again.wait(60)
        assert code in (0, 1), again.describe()
    info, events = read_run(url, run_id)
    check_run(plan, run_id, info, events, ledger)
    assert [e.type for e in events].count("run_resumed") <= 1  # 0: the run had finished before the kill
    assert code == (0 if info.result.ok else 1)
    return ledger, code, run_id


def _check(ledger: Ledger, run_id: str, url: str, expected: Expected) -> None:
    info, _events = read_run(url, run_id)
    calls = ledger.calls()
    for sid, (status, attempts) in expected.items():
        record = info.result.steps[sid]
        mine = [c for c in calls if c.step == sid]
        assert record.status == status, (sid, record)
        assert [c.attempt for c in mine] == attempts, (sid, mine)
        assert all(c.key == f"{run_id}:{sid}" for c in mine), mine
        if status == "unknown_outcome":
            assert record.error is not None and record.error.kind == "unknown_outcome"
            assert f"'{run_id}:{sid}'" in record.error.message, record.error.message
            assert record.attempts == 1, record
        if status == "succeeded":
            assert record.attempts == attempts[-1], record


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize(
    ("tools", "n", "expected"),
    [
        # s0's call never happened, but it may have: charge is not repeated, so unknown_outcome.
        (["charge", "put", "look"], 1, {"s0": ("unknown_outcome", []), "s1": ("skipped", []), "s2": ("skipped", [])}),
        (
            ["put", "charge", "look"],
            2,
            {"s0": ("succeeded", [1]), "s1": ("unknown_outcome", []), "s2": ("skipped", [])},
        ),
        (["put", "charge", "look"], 1, {"s0": ("succeeded", [2]), "s1": ("succeeded", [1]), "s2": ("succeeded", [1])}),
        (["look", "charge", "put"], 1, {"s0": ("succeeded", [2]), "s1": ("succeeded", [1]), "s2": ("succeeded", [1])}),
    ],
    ids=["charge-unknown", "second-charge-unknown", "put-rerun", "look-rerun"],
)
def test_after_claim(tmp_path: Path, tools: list[str], n: int, expected: Expected) -> None:
    ledger, _code, run_id = _crash_and_resume(tmp_path, tools, f"after_claim={n}")
    _check(ledger, run_id, _url(tmp_path), expected)
    assert ledger.count("charges") == sum(len(expected[f"s{i}"][1]) for i, name in enumerate(tools) if name == "charge")


@pytest.mark.parametrize(
    ("tools", "n", "expected"),
    [
        # The charge happened (the ledger holds it) but its result never committed: not repeated.
        (["charge", "put", "look"], 1, {"s0": ("unknown_outcome", [1]), "s1": ("skipped", []), "s2": ("skipped", [])}),
        (
            ["put", "look", "charge"],
            3,
            {"s0": ("succeeded", [1]), "s1": ("succeeded", [1]), "s2": ("unknown_outcome", [1])},
        ),
        # Idempotent and read-only steps are called again, with the same idempotency key.
        (
            ["put", "charge", "look"],
            1,
            {"s0": ("succeeded", [1, 2]), "s1": ("succeeded", [1]), "s2": ("succeeded", [1])},
        ),
        (
            ["look", "charge", "put"],
            1,
            {"s0": ("succeeded", [1, 2]), "s1": ("succeeded", [1]), "s2": ("succeeded", [1])},
        ),
    ],
    ids=["charge-unknown", "third-charge-unknown", "put-rerun", "look-rerun"],
)
def test_after_call(tmp_path: Path, tools: list[str], n: int, expected: Expected) -> None:
    ledger, _code, run_id = _crash_and_resume(tmp_path, tools, f"after_call={n}")
    _check(ledger, run_id, _url(tmp_path), expected)
    charged = [f"s{i}" for i, name in enumerate(tools) if name == "charge"]
    assert ledger.charges() == {f"{run_id}:{sid}": 1 for sid in charged}  # each charge happened once
    if tools[0] == "put" and n == 1:  # called twice, one effect: the upsert by key
        effects = ledger.effects()
        assert effects[f"{run_id}:s0"][1] == 2
        assert len([k for k in effects if k.endswith(":s0")]) == 1


@pytest.mark.parametrize(
    ("tools", "n"),
    [
        (["charge", "put", "look"], 1),
        (["put", "look", "charge"], 2),
        (["charge", "charge", "charge"], 3),  # the last result committed (with the run's end): nothing to call
    ],
    ids=["first", "second", "last"],
)
def test_after_commit(tmp_path: Path, tools: list[str], n: int) -> None:
    ledger, code, run_id = _crash_and_resume(tmp_path, tools, f"after_commit={n}")
    info, _events = read_run(_url(tmp_path), run_id)
    calls, starts = ledger.calls(), ledger.starts()
    first = calls[0].pid  # the process that died
    for i, tool in enumerate(tools):
        sid = f"s{i}"
        record = info.result.steps[sid]
        mine = [c for c in calls if c.step == sid]
        if i < n:  # committed before the kill: reused, never called again
            assert record.status == "succeeded", record
            assert [(c.pid, c.attempt) for c in mine] == [(first, 1)], mine
            assert record.attempts == 1
            continue
        # The dead process never called it (the kill came right after the commit before it) ...
        assert not [s for s in starts if s.step == sid and s.pid == first], starts
        if tool != "charge" or record.status == "succeeded":  # ... so the resume called it, once
            assert record.status == "succeeded", record
            assert len(mine) == 1 and mine[0].pid != first, mine
        else:
            # ... but its `running` row may have committed in the same transaction as the result
            # before it (group commit): a charge then ends unknown_outcome, although never called.
            assert (i, record.status, mine) == (n, "unknown_outcome", []), record
    assert ledger.count("charges") == len([c for c in calls if c.tool == "charge"])
    assert code == (0 if all(r.ok for r in info.result.steps.values()) else 1)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_commit_error_is_retried(tmp_path: Path, n: int) -> None:
    plan = chain_plan(["charge", "put", "look", "charge"])
    plan_path = write_plan(tmp_path / "plan.json", plan)
    url = _url(tmp_path)
    ledger = Ledger(tmp_path / "ledger.db")
    with Procs(tmp_path / "logs") as procs:
        proc = procs.start(
            toolplan_args("run", str(plan_path), "--tools", str(TOOLS), "--db", url, "--run-id", "commit-error"),
            toolplan_env(ledger.path, TOOLPLAN_FAULTS=f"commit_error={n}"),
            "commit-error",
        )
        assert proc.wait(60) == 0, proc.describe()
    info, events = read_run(url, "commit-error")
    assert info.summary.status == "succeeded"
    check_run(plan, "commit-error", info, events, ledger)
    assert [c.step for c in ledger.calls()] == ["s0", "s1", "s2", "s3"]  # each called once
    assert ledger.count("charges") == 2


def test_budget_counters_survive_a_resume_killed_before_its_first_result(tmp_path: Path) -> None:
    """The run's stored tool-call count goes on from its stored value, whatever process dies when."""
    plan = chain_plan(["put", "put", "put", "put"])
    plan_path = write_plan(tmp_path / "plan.json", plan)
    url = _url(tmp_path)
    ledger = Ledger(tmp_path / "ledger.db")
    resume_args = toolplan_args("runs", "resume", "budget", "--tools", str(TOOLS), "--db", url)
    with Procs(tmp_path / "logs") as procs:
        first = procs.start(
            toolplan_args("run", str(plan_path), "--tools", str(TOOLS), "--db", url, "--run-id", "budget"),
            toolplan_env(ledger.path, TOOLPLAN_FAULTS="after_commit=2"),
            "first",
        )
        assert first.wait(60) == -9, first.describe()
        info, events = read_run(url, "budget")
        began = _began(events)
        assert began >= 2 and info.summary.calls == began  # s0 and s1 committed (and s2 may have begun)
        # The next process commits s2's `running` row (a call begun), then dies before any result.
        second = procs.start(resume_args, toolplan_env(ledger.path, TOOLPLAN_FAULTS="after_claim=1"), "second")
        assert second.wait(60) == -9, second.describe()
        info, events = read_run(url, "budget")
        assert info.summary.calls == _began(events) > began, "the resumed run's calls were not counted"
        last = procs.start(resume_args, toolplan_env(ledger.path), "last")
        assert last.wait(60) == 0, last.describe()
    info, events = read_run(url, "budget")
    check_run(plan, "budget", info, events, ledger)
    assert len(ledger.calls()) == 4
    # Every call begun on record counts, the one the second process died before making included.
    assert info.summary.calls == _began(events) >= 5, info.summary


def _began(events: list[Any]) -> int:
    return sum(1 for e in events if e.type == "step_started")
