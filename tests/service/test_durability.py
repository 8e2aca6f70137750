"""The service's executions outlive its processes: kill -9, SIGTERM and restart of `toolplan serve`.

Each test runs real ``toolplan serve`` processes on one SQLite file (leases of 2 s). The plan charges
(a side effect recorded in a ledger), waits at a gate the test opens, then adds. Whatever happens
to the process in between, the charge is made exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from svc_http import GATED, Event, ledger, read_events, sse, start, started
from svc_support import ProcessServer

from toolplan.service._store import ServiceStore
from toolplan.store import open_store

pytestmark = pytest.mark.slow

Spawn = Callable[..., ProcessServer]


def stored(db_url: str, execution_id: str) -> tuple[str, str | None]:
    """The execution's status and owner, as the store has them."""

    async def read() -> tuple[str, str | None]:
        async with open_store(db_url) as store:
            s = (await store.get_run(execution_id)).summary
            return s.status, s.owner

    return asyncio.run(read())


def assert_consecutive(seen: list[Event]) -> None:
    """Event ids 1, 2, 3, ... with no gap or repeat, each the event's own number."""
    assert [e["event_id"] for e in seen] == list(range(1, len(seen) + 1))
    assert [e["seq"] for e in seen] == [e["event_id"] for e in seen]


def count(seen: list[Event], kind: str, step_id: str) -> int:
    return sum(1 for e in seen if e["type"] == kind and e["step_id"] == step_id)


def steps_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in body["steps"]}


def test_kill_9_mid_execution_then_a_new_server_finishes_it_without_charging_again(
    spawn: Spawn, db_url: str, gates: Path, tmp_path: Path
) -> None:
    a = spawn(db_url)
    with a.client() as c:
        execution_id = start(c, GATED)
        before = read_events(c, execution_id, until=started("wait"))
    assert ledger(tmp_path / "ledger.txt") == ["5"]
    a.kill()
    assert stored(db_url, execution_id)[0] == "running"  # as the dead process left it
    (gates / "open").touch()

    b = spawn(db_url)
    with b.client() as c:
        seen = read_events(c, execution_id)
        body = c.get(f"/v1/executions/{execution_id}").json()
    assert seen[: len(before)] == before
    assert_consecutive(seen)
    assert seen[-1]["type"] == "plan_finished" and seen[-1]["payload"] == {"status": "succeeded"}
    assert body["status"] == "succeeded" and body["outputs"] == {"last": 2}
    assert ledger(tmp_path / "ledger.txt") == ["5"]  # no succeeded step ran again
    assert count(seen, "step_started", "first") == count(seen, "step_finished", "first") == 1
    steps = steps_of(body)
    assert steps["first"]["status"] == "succeeded" and steps["first"]["attempts"] == 1
    assert count(seen, "step_started", "wait") == 2  # read-only: called again after the crash
    assert {sid: s["reused"] for sid, s in steps.items()} == {"first": True, "wait": False, "last": False}
    owners = [e["payload"]["owner"] for e in seen if e["type"] in ("run_started", "run_resumed")]
    assert len(owners) == 2 and owners[0] != owners[1]
    assert [int(o.split(":")[1]) for o in owners] == [a.pid, b.pid]


@pytest.mark.parametrize("stop", ["kill", "term"])
def test_sse_resumes_with_last_event_id_across_a_restart(
    spawn: Spawn, db_url: str, gates: Path, tmp_path: Path, stop: str
) -> None:
    a = spawn(db_url)
    first: list[Event] = []
    with a.client() as c:
        execution_id = start(c, GATED)
        with c.stream("GET", f"/v1/executions/{execution_id}/events") as r:
            events = sse(r.iter_lines())
            for e in events:
                first.append(e)
                if started("wait")(e):
                    break
            a.kill() if stop == "kill" else a.stop()  # while the client is connected
            with contextlib.suppress(httpx.TransportError):  # the stream ends, cleanly or not
                first.extend(events)  # what a graceful stop sent as it stopped, if anything
    assert first[-1]["type"] != "plan_finished"

    b = spawn(db_url)
    with b.client() as c:
        # The new server has taken the execution up: read up to there, then open the gate and follow it.
        middle = read_events(c, execution_id, last=first[-1]["event_id"], until=lambda e: e["type"] == "run_resumed")
        (gates / "open").touch()
        rest = read_events(c, execution_id, last=middle[-1]["event_id"])
        whole = read_events(c, execution_id)
    seen = first + middle + rest
    assert_consecutive(seen)
    assert seen == whole  # exactly the events after each id: no gap, no repeat
    assert rest[-1]["type"] == "plan_finished" and rest[-1]["payload"] == {"status": "succeeded"}
    assert [e["type"] for e in seen].count("plan_finished") == 1
    assert ledger(tmp_path / "ledger.txt") == ["5"]


def test_sigterm_queues_a_running_execution_again_and_the_next_server_finishes_it(
    spawn: Spawn, db_url: str, gates: Path, tmp_path: Path
) -> None:
    a = spawn(db_url)
    with a.client() as c:
        execution_id = start(c, GATED)
        first = read_events(c, execution_id, until=started("wait"))
    a.stop()  # SIGTERM: a graceful stop
    # uvicorn stops gracefully, then ends by the signal it got (as a process that ignored it would).
    assert a.process is not None and a.process.returncode in (0, -15), a.stderr()
    assert stored(db_url, execution_id) == ("queued", None)  # handed back, for any process to take
    (gates / "open").touch()

    b = spawn(db_url)
    with b.client() as c:
        rest = read_events(c, execution_id, last=first[-1]["event_id"])
        body = c.get(f"/v1/executions/{execution_id}").json()
    seen = first + rest
    assert_consecutive(seen)
    assert body["status"] == "succeeded" and body["outputs"] == {"last": 2}
    assert ledger(tmp_path / "ledger.txt") == ["5"]
    assert count(seen, "step_finished", "first") == 1
    kinds = [e["type"] for e in rest]
    assert kinds[kinds.index("run_queued") + 1] == "run_resumed"  # queued by A as it stopped, taken up by B
    assert [e["type"] for e in seen].count("plan_finished") == 1  # stopping is no end
    assert "Traceback" not in a.stderr()


def test_a_cancel_asked_before_a_graceful_stop_stays_a_cancel(
    spawn: Spawn, db_url: str, gates: Path, tmp_path: Path
) -> None:
    a = spawn(db_url)
    with a.client() as c:
        execution_id = start(c, GATED)
        read_events(c, execution_id, until=started("wait"))
    asked = asyncio.run(_ask_cancel(db_url, execution_id))  # as another server would: a flag for A's next look
    assert asked == "running"
    a.stop()  # whether A saw the flag before it stopped or not, the execution ends cancelled
    assert stored(db_url, execution_id) == ("cancelled", None)
    (gates / "open").touch()

    b = spawn(db_url)
    with b.client() as c:
        later = start(c, {"steps": [{"id": "x", "tool": "add", "arguments": {"a": 1, "b": 2}}]})
        read_events(c, later)  # B looks for work oldest first: it has passed the cancelled one by
        seen = read_events(c, execution_id)
        assert c.get(f"/v1/executions/{later}").json()["status"] == "succeeded"
    assert seen[-1]["type"] == "plan_finished" and seen[-1]["payload"] == {"status": "cancelled"}
    assert [e["type"] for e in seen].count("plan_finished") == 1
    assert stored(db_url, execution_id) == ("cancelled", None)
    assert count(seen, "step_started", "last") == 0 and ledger(tmp_path / "ledger.txt") == ["5"]


async def _ask_cancel(db_url: str, execution_id: str) -> str:
    async with open_store(db_url) as store:
        return await ServiceStore(store).request_cancel(execution_id)
