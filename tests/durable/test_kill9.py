"""Kill -9, many times: a durable ``toolplan run`` killed at seeded moments and resumed until it finishes.

Each kill is SIGKILL of the real ``toolplan run --db`` process, at a moment chosen by waiting on
something observable: the external ledger has K more finished calls, or K more calls have begun (a
kill mid-call), or a fault point (``TOOLPLAN_FAULTS``) was passed for the Nth time. After each kill
the same command (same ``--run-id``) resumes the run. The finished run is then checked against the
ledger and against a crash-free run of the same plan (see `durable_support.check_run`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from durable_support import (
    TOOLS,
    Ledger,
    Procs,
    check_run,
    outputs,
    random_plan,
    read_run,
    toolplan_args,
    toolplan_env,
    wait_until,
    write_plan,
)

STEPS = 60
KILLS = 16  # kill attempts; at least MIN_KILLS must land before the run finishes
MIN_KILLS = 10
SEEDS = {"sqlite": 20231, "postgres": 20232}


@dataclass(frozen=True)
class Kill:
    """When to kill one process: after ``k`` more ``calls`` or ``starts`` in the ledger, or at a fault point."""

    mode: str  # "calls", "starts" or "fault"
    k: int = 0
    fault: str = ""

    def __str__(self) -> str:
        return self.fault if self.mode == "fault" else f"{self.mode}+{self.k}"


def kill_schedule(rng: random.Random) -> list[Kill]:
    kills: list[Kill] = []
    for _ in range(KILLS):
        mode = rng.choice(("calls", "calls", "starts", "starts", "fault"))
        if mode == "fault":
            point = rng.choice(("after_claim", "after_call", "after_commit"))
            kills.append(Kill("fault", fault=f"{point}={rng.randint(1, 3)}"))
        else:
            kills.append(Kill(mode, k=rng.randint(1, 3)))
    return kills


def _db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_9_many_times_then_resume(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = _db_url(backend, tmp_path, request)
    seed = SEEDS[backend]
    rng = random.Random(seed)
    plan = random_plan(seed, STEPS, ms=(20, 80))
    plan_path = write_plan(tmp_path / "plan.json", plan)
    run_id = f"kill9-{backend}-{seed}"

    with Procs(tmp_path / "logs") as procs:
        # The crash-free reference: the same plan, its own database and ledger.
        ref_ledger = Ledger(tmp_path / "ref-ledger.db")
        ref_url = f"sqlite:///{tmp_path / 'ref.db'}"
        args = ["run", str(plan_path), "--tools", str(TOOLS), "--max-steps", "100"]
        ref = procs.start(
            toolplan_args(*args, "--db", ref_url, "--run-id", "ref"), toolplan_env(ref_ledger.path), "ref"
        )
        assert ref.wait(60) == 0, ref.describe()
        ref_info, ref_events = read_run(ref_url, "ref")
        check_run(plan, "ref", ref_info, ref_events, ref_ledger)
        reference = outputs(ref_info)
        assert len(reference) == STEPS
        assert all(len(ref_ledger.rows("SELECT 1 FROM calls WHERE step = ?", (s,))) == 1 for s in reference)

        ledger = Ledger(tmp_path / "ledger.db")
        command = toolplan_args(*args, "--db", url, "--run-id", run_id)
        landed: list[str] = []
        finished: int | None = None
        for kill in kill_schedule(rng):
            faults = {"TOOLPLAN_FAULTS": kill.fault} if kill.mode == "fault" else {}
            table = "starts" if kill.mode == "starts" else "calls"
            target = ledger.count(table) + kill.k
            proc = procs.start(command, toolplan_env(ledger.path, **faults), f"kill-{kill}")
            if kill.mode == "fault":
                code = proc.wait(60)
            elif wait_until(partial(ledger.at_least, table, target), proc, 60, f"{kill.k} more {table}"):
                code = proc.kill9()
            else:
                code = proc.wait(60)
            if code == -9:
                landed.append(str(kill))
                continue
            assert code in (0, 1), proc.describe()  # the run finished before this kill
            finished = code
            break
        if finished is None:
            last = procs.start(command, toolplan_env(ledger.path), "final")
            finished = last.wait(60)
            assert finished in (0, 1), last.describe()

    assert len(landed) >= MIN_KILLS, f"only {len(landed)} kills landed before the run finished: {landed}"
    info, events = read_run(url, run_id)
    counts = check_run(plan, run_id, info, events, ledger, reference=reference)
    assert finished == (0 if info.result.ok else 1)
    resumed = sum(1 for e in events if e.type == "run_resumed")
    assert resumed <= len(landed), (resumed, landed)
    made = len(ledger.calls())
    print(f"{backend}: kills {landed}; {counts}; {len(events)} events; calls {info.summary.calls}, ledger {made}")
