"""Replicas: several ``toolplan serve`` processes on one PostgreSQL database share the work, each execution once.

Needs the machine's PostgreSQL (the ``postgres_url`` fixture: skipped without a server, mandatory
under ``CI=true``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from svc_http import ledger, post_plan, read_events
from svc_support import ProcessServer

N = 40  # executions, half posted to each server
CLIENTS_PER_SERVER = 4


def charged(amount: int) -> dict[str, Any]:
    """Charge ``amount`` (a side effect the ledger records), then add 1 to it."""
    return {
        "steps": [
            {"id": "pay", "tool": "charge", "arguments": {"amount": amount}},
            {"id": "sum", "tool": "add", "arguments": {"a": amount, "b": 1}, "depends_on": ["pay"]},
        ],
        "output_steps": ["sum"],
    }


@pytest.mark.slow
def test_two_servers_run_every_execution_exactly_once_and_both_run_some(
    postgres_url: str, spawn: Callable[..., ProcessServer], gates: Path, tmp_path: Path
) -> None:
    servers = [spawn(postgres_url), spawn(postgres_url)]

    def submit(job: tuple[int, int]) -> tuple[str, dict[str, Any]]:
        which, amount = job
        with servers[which].client() as c:
            plan_id = post_plan(c, charged(amount))
            r = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 60})
            assert r.status_code == 200, r.text  # it ended within the wait: the whole execution
            return str(r.json()["execution_id"]), r.json()

    jobs = [(amount % 2, amount) for amount in range(1, N + 1)]
    with ThreadPoolExecutor(2 * CLIENTS_PER_SERVER) as pool:
        done = list(pool.map(submit, jobs))

    for (_, amount), (_, body) in zip(jobs, done, strict=True):
        assert body["status"] == "succeeded" and body["outputs"] == {"sum": amount + 1}, body
    assert sorted(int(n) for n in ledger(tmp_path / "ledger.txt")) == list(range(1, N + 1))  # each charged once

    owners: Counter[int] = Counter()
    with servers[0].client() as c:
        for execution_id, _ in done:
            seen = read_events(c, execution_id)
            takes = [e for e in seen if e["type"] in ("run_started", "run_resumed")]
            assert [e["type"] for e in takes] == ["run_started"], seen  # claimed once, by one process
            assert [e["type"] for e in seen].count("plan_finished") == 1
            assert sum(1 for e in seen if e["type"] == "step_started" and e["step_id"] == "pay") == 1
            owners[int(takes[0]["payload"]["owner"].split(":")[1])] += 1
    assert set(owners) == {s.pid for s in servers}, owners  # both processes ran some
    assert sum(owners.values()) == N
