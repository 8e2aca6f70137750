"""The service on PostgreSQL: the REST basics, and several servers sharing one database.

Every test needs the machine's PostgreSQL (the ``postgres_url`` fixture: a fresh database; skipped
without a server, mandatory under ``CI=true``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from svc_http import GATED, Event, gated, ledger, post_plan, read_events, start, started
from svc_support import ProcessServer, ThreadServer

from toolplan.service._store import ServiceStore
from toolplan.store import open_store

Spawn = Callable[..., ProcessServer]

CHAIN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
    ],
    "output_steps": ["b"],
}


def owner_pid(seen: list[Event]) -> int:
    """The process id of the server that took the execution up last (its ``run_started`` or ``run_resumed`` event)."""
    owner = [e["payload"]["owner"] for e in seen if e["type"] in ("run_started", "run_resumed")][-1]
    return int(owner.split(":")[1])


def stored(db_url: str, execution_id: str) -> tuple[str, str | None, bool]:
    async def read() -> tuple[str, str | None, bool]:
        async with open_store(db_url) as store:
            s = (await store.get_run(execution_id)).summary
            return s.status, s.owner, s.cancel_requested

    return asyncio.run(read())


def test_the_rest_basics_on_postgresql(
    postgres_url: str, thread_server: Callable[..., ThreadServer], gates: Path, tmp_path: Path
) -> None:
    server = thread_server(postgres_url)
    with server.client() as c:
        plan_id = post_plan(c, CHAIN)
        r = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30})
        assert r.status_code == 200 and r.json()["status"] == "succeeded" and r.json()["outputs"] == {"b": 13}
        assert c.get(f"/v1/executions/{r.json()['execution_id']}").json() == r.json()

        key = {"Idempotency-Key": "pg-1"}
        first = c.post(f"/v1/plans/{plan_id}/executions", headers=key)
        again = c.post(f"/v1/plans/{plan_id}/executions", headers=key)
        assert first.status_code == 202 and again.json() == first.json()
        assert again.headers["Idempotent-Replayed"] == "true"
        assert c.post(f"/v1/plans/{plan_id}/executions", headers=key, json={}).status_code == 409
        assert len(c.get("/v1/executions", params={"plan_id": plan_id}).json()["items"]) == 2

        execution_id = start(c, GATED)
        read_events(c, execution_id, until=started("wait"))
        assert c.post(f"/v1/executions/{execution_id}/cancel").json()["status"] in ("cancelling", "cancelled")
        stopped = read_events(c, execution_id)
        assert stopped[-1]["payload"] == {"status": "cancelled"}
        (gates / "open").touch()
        assert c.post(f"/v1/executions/{execution_id}/resume").json()["status"] == "queued"
        rest = read_events(c, execution_id, last=stopped[-1]["event_id"])
        assert rest[-1]["payload"] == {"status": "succeeded"}
        assert [e["event_id"] for e in stopped + rest] == list(range(1, len(stopped) + len(rest) + 1))
        body = c.get(f"/v1/executions/{execution_id}").json()
        assert body["status"] == "succeeded" and body["outputs"] == {"last": 2}
        reused = {s["id"]: s["reused"] for s in body["steps"]}
        assert reused == {"first": True, "wait": False, "last": False}  # first ended before the cancel
        page = c.get("/v1/executions", params={"limit": 2}).json()
        assert len(page["items"]) == 2 and page["next_cursor"] is not None
    assert ledger(tmp_path / "ledger.txt") == ["5"]


def test_a_revoked_key_is_refused_from_its_next_request_on_postgresql(
    postgres_url: str, thread_server: Callable[..., ThreadServer], gates: Path
) -> None:
    server = thread_server(postgres_url)
    with server.client() as c:
        for _ in range(10):  # the key's row read again and again through the service's read pool
            assert c.get("/v1/plans").status_code == 200

        async def revoke() -> None:
            async with open_store(postgres_url) as store:
                data = ServiceStore(store)
                (key,) = await data.list_keys()
                await data.revoke_key(key.key_id)

        asyncio.run(revoke())
        refused = c.get("/v1/plans")
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"


@pytest.mark.slow
def test_two_servers_on_one_database_share_the_work(
    postgres_url: str, spawn: Spawn, gates: Path, tmp_path: Path
) -> None:
    a = spawn(postgres_url, "--slots", "1")
    b = spawn(postgres_url)
    with a.client() as c:
        ids = [start(c, gated(amount=n)) for n in range(1, 21)]  # all posted to A
        # A runs one at a time (--slots 1) and each waits at the gate: B takes up the others.
        pids: set[int] = set()
        for execution_id in ids:
            pids.add(owner_pid(read_events(c, execution_id, until=started("wait"))))
            if len(pids) == 2:
                break
        assert pids == {a.pid, b.pid}
        (gates / "open").touch()
        owners: list[str] = []
        for execution_id in ids:
            seen = read_events(c, execution_id)
            assert seen[-1]["payload"] == {"status": "succeeded"}, seen[-1]
            assert [e["event_id"] for e in seen] == list(range(1, len(seen) + 1))
            owners += [e["payload"]["owner"] for e in seen if e["type"] in ("run_started", "run_resumed")]
            body = c.get(f"/v1/executions/{execution_id}").json()
            assert body["status"] == "succeeded" and body["outputs"] == {"last": 2}
    assert sorted(int(n) for n in ledger(tmp_path / "ledger.txt")) == list(range(1, 21))  # each charged once
    assert len(owners) == 20 and {int(o.split(":")[1]) for o in owners} == {a.pid, b.pid}
    with b.client() as c:  # B shows what A posted and ran, and the other way round
        listed = c.get("/v1/executions", params={"status": "succeeded", "limit": 50}).json()["items"]
        assert {e["execution_id"] for e in listed} == set(ids)


@pytest.mark.slow
def test_a_cancel_sent_to_one_server_stops_the_execution_another_runs(
    postgres_url: str, spawn: Spawn, gates: Path, tmp_path: Path
) -> None:
    a = spawn(postgres_url)
    b = spawn(postgres_url)
    with a.client() as ca, b.client() as cb:
        execution_id = start(ca, GATED)
        runner = owner_pid(read_events(ca, execution_id, until=started("wait")))
        other = cb if runner == a.pid else ca  # the server that does not run it
        r = other.post(f"/v1/executions/{execution_id}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelling"
        seen = read_events(other, execution_id)
        assert seen[-1]["type"] == "plan_finished" and seen[-1]["payload"] == {"status": "cancelled"}
        body = other.get(f"/v1/executions/{execution_id}").json()
        steps = {s["id"]: s for s in body["steps"]}
        assert body["status"] == "cancelled" and steps["wait"]["status"] == "cancelled"
        assert steps["last"]["status"] == "not_run"
    (gates / "open").touch()
    assert not any(e["type"] == "step_started" and e["step_id"] == "last" for e in seen)
    assert ledger(tmp_path / "ledger.txt") == ["5"]


@pytest.mark.slow
def test_a_graceful_stop_hands_executions_back_on_postgresql(
    postgres_url: str, spawn: Spawn, gates: Path, tmp_path: Path
) -> None:
    a = spawn(postgres_url)
    with a.client() as c:
        keep = start(c, gated(amount=1, gate="keep"))
        drop = start(c, gated(amount=2, gate="drop"))
        for execution_id in (keep, drop):
            read_events(c, execution_id, until=started("wait"))
    asyncio.run(_ask_cancel(postgres_url, drop))  # a flag for A's next look
    a.stop()
    assert stored(postgres_url, keep)[:2] == ("queued", None)  # for the next server
    assert stored(postgres_url, drop)[:2] == ("cancelled", None)  # asked: it stays cancelled
    (gates / "keep").touch()
    (gates / "drop").touch()

    b = spawn(postgres_url)
    with b.client() as c:
        kept = read_events(c, keep)
        dropped = read_events(c, drop)
    assert kept[-1]["payload"] == {"status": "succeeded"} and dropped[-1]["payload"] == {"status": "cancelled"}
    assert [e["type"] for e in kept].count("plan_finished") == 1
    assert sorted(ledger(tmp_path / "ledger.txt")) == ["1", "2"]


async def _ask_cancel(db_url: str, execution_id: str) -> None:
    async with open_store(db_url) as store:
        assert await ServiceStore(store).request_cancel(execution_id) == "running"


@pytest.mark.slow
def test_kill_9_mid_execution_on_postgresql_then_another_server_finishes_it(
    postgres_url: str, spawn: Spawn, gates: Path, tmp_path: Path
) -> None:
    a = spawn(postgres_url)
    with a.client() as c:
        execution_id = start(c, GATED)
        before = read_events(c, execution_id, until=started("wait"))
    a.kill()
    (gates / "open").touch()
    b = spawn(postgres_url)  # on this machine: it sees A is gone and takes the execution up at once
    with b.client() as c:
        seen = read_events(c, execution_id)
        body = c.get(f"/v1/executions/{execution_id}").json()
    assert seen[: len(before)] == before and [e["event_id"] for e in seen] == list(range(1, len(seen) + 1))
    assert body["status"] == "succeeded" and owner_pid(seen) == b.pid
    assert {s["id"]: s["reused"] for s in body["steps"]} == {"first": True, "wait": False, "last": False}
    assert ledger(tmp_path / "ledger.txt") == ["5"]
    assert sum(1 for e in seen if e["type"] == "step_started" and e["step_id"] == "first") == 1
