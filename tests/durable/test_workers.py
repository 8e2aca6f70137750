"""Two ``toolplan runs work`` processes share one PostgreSQL database; then one is killed mid-run.

Runs are submitted with `Store.submit`; the workers (real subprocesses, ``TOOLPLAN_LEASE`` short)
claim and run them. The external ledger (see ``ledger_tools.py``) records every call with the pid
of the process that made it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from durable_support import (
    NON_IDEMPOTENT,
    TOOLS,
    Ledger,
    Procs,
    Start,
    check_run,
    random_plan,
    read_run,
    toolplan_args,
    toolplan_env,
    wait_until,
)

from toolplan.plan import parse_plan
from toolplan.store import open_store

SEED = 4242
LEASE = 1.5  # seconds: a dead worker's run is taken over this long after its last renewal


def _submit(url: str, plans: Mapping[str, Mapping[str, Any]]) -> None:
    async def go() -> None:
        async with open_store(url) as store:
            for run_id, plan in plans.items():
                assert await store.submit(parse_plan(dict(plan)), run_id=run_id) == run_id

    asyncio.run(go())


def _plans(prefix: str, n: int, seed: int) -> dict[str, dict[str, Any]]:
    return {f"{prefix}{i:02d}": random_plan(seed + i, 10, ms=(20, 50)) for i in range(n)}


def _work(url: str, idle: float) -> list[str]:
    return toolplan_args("runs", "work", "--tools", str(TOOLS), "--db", url, "--idle", str(idle), "--poll", "0.1")


def _a_charge_in_flight(ledger: Ledger, pid: int) -> bool:
    return bool(ledger.in_flight(pid=pid, tool=NON_IDEMPOTENT))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_workers_then_one_killed(postgres_url: str, tmp_path: Path) -> None:
    url = postgres_url
    ledger = Ledger(tmp_path / "ledger.db")
    env = toolplan_env(ledger.path, TOOLPLAN_LEASE=str(LEASE))
    first = _plans("a", 20, SEED)
    second = _plans("b", 10, SEED + 100)

    with Procs(tmp_path / "logs") as procs:
        # 1. Two workers, 20 queued runs: each run is run by one of them, each step called once.
        _submit(url, first)
        w1, w2 = procs.start(_work(url, 3), env, "w1"), procs.start(_work(url, 3), env, "w2")
        assert w1.wait(90) == 0, w1.describe()
        assert w2.wait(90) == 0, w2.describe()
        calls = ledger.calls()
        assert len(calls) == 20 * 10
        assert all(n == 1 for n in Counter(c.key for c in calls).values()), "a step was called twice"
        runner: dict[str, set[int]] = {}
        for c in calls:
            runner.setdefault(c.run_id, set()).add(c.pid)
        assert all(len(pids) == 1 for pids in runner.values()), runner  # one worker per run
        per_worker = Counter(next(iter(pids)) for pids in runner.values())
        assert set(per_worker) == {w1.pid, w2.pid}, f"one worker did every run: {per_worker}"
        for run_id, plan in first.items():
            info, events = read_run(url, run_id)
            assert info.summary.status == "succeeded", run_id
            check_run(plan, run_id, info, events, ledger)
        reported = [line.split(":")[0] for line in w1.out().splitlines() + w2.out().splitlines() if line.strip()]
        assert set(reported) == set(first), reported

        # 2. Two more workers, 10 more runs; one is killed (SIGKILL) mid-call of a non-idempotent tool.
        _submit(url, second)
        doomed, survivor = procs.start(_work(url, 8), env, "doomed"), procs.start(_work(url, 8), env, "survivor")
        assert wait_until(partial(_a_charge_in_flight, ledger, doomed.pid), doomed, 60, "a charge in flight")
        assert doomed.kill9() == -9
        in_flight: list[Start] = ledger.in_flight(pid=doomed.pid)  # its calls that never returned
        held = {s.key.split(":")[0] for s in in_flight}
        assert len(held) == 1, in_flight  # a worker runs one run at a time
        (victim,) = held
        info, _events = read_run(url, victim)
        assert info.summary.status == "running" and f":{doomed.pid}:" in (info.summary.owner or ""), info.summary
        # The survivor takes the victim over once its lease expires, and finishes every run.
        assert survivor.wait(90) == 0, survivor.describe()

    # What the store held in flight for the dead worker: steps whose `running` row (step_started)
    # it committed, with no result after it. A charge among them ends unknown_outcome (whether the
    # dead worker had entered the tool or not); the others are called again by the survivor.
    victim_info, victim_events = read_run(url, victim)
    resumed = [i for i, e in enumerate(victim_events) if e.type == "run_resumed"]
    assert len(resumed) == 2, [e.type for e in victim_events]  # the dead worker's, then the survivor's
    assert f":{doomed.pid}:" in victim_events[resumed[0]].payload["owner"]
    assert f":{survivor.pid}:" in victim_events[resumed[1]].payload["owner"]
    window = victim_events[resumed[0] : resumed[1]]
    started = {e.step_id for e in window if e.type == "step_started" and e.step_id is not None}
    store_in_flight = started - {e.step_id for e in window if e.type == "step_finished"}
    victim_plan = second[victim]
    victim_tools = {s["id"]: s["tool"] for s in victim_plan["steps"]}
    assert {s.step for s in in_flight} <= store_in_flight, (in_flight, store_in_flight)
    unknown = {sid for sid, r in victim_info.result.steps.items() if r.status == "unknown_outcome"}
    assert unknown == {sid for sid in store_in_flight if victim_tools[sid] == NON_IDEMPOTENT}, (unknown, window)
    assert any(s.tool == NON_IDEMPOTENT for s in in_flight), in_flight  # killed mid-call of a charge
    calls = ledger.calls()
    for sid in store_in_flight - unknown:  # called again, same key, a later attempt, by the survivor
        mine = [c for c in calls if c.key == f"{victim}:{sid}"]
        assert victim_info.result.steps[sid].status == "succeeded", victim_info.result.steps[sid]
        assert mine and mine[-1].pid == survivor.pid and mine[-1].attempt >= 2, mine
    for run_id, plan in second.items():
        info, events = read_run(url, run_id)
        check_run(plan, run_id, info, events, ledger)
        if run_id != victim:
            assert info.summary.status == "succeeded", (run_id, info.summary)
            assert len({c.pid for c in calls if c.run_id == run_id}) == 1
    assert f"{victim}: failed" in survivor.out(), survivor.out()
