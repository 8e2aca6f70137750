"""A run that finishes while another process is claiming it must stay finished.

Claiming a run reads its row, then updates it. Store B is made to stop between the two (a hook on
its engine, just before its claiming UPDATE), and store A runs the same run to its end in that
gap, as another worker would. B must then not reopen the finished run: `Store.claim_next` finds
nothing to do, and `resume` returns the stored result without writing or calling anything.
In-process (two stores on one database) so that the interleaving is exact.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolplan import PlanResult, ToolError, tool
from toolplan.execute import RunLimits
from toolplan.plan import parse_plan
from toolplan.store import Store, open_store, resume

CALLS: list[str] = []


@tool(idempotent=True)
async def slow(x: int) -> int:
    """Wait a little, then return ``x``."""
    CALLS.append("slow")
    await asyncio.sleep(0.3)
    return x


@tool
async def boom(x: int) -> int:
    """Fail (after a short wait)."""
    CALLS.append("boom")
    await asyncio.sleep(0.05)
    raise ToolError(f"boom {x}")


TOOLS = [slow, boom]
# fail_fast: boom fails, slow is cancelled mid-call: its row ends `cancelled`, a status a resume
# treats as in flight. Only a run that is reopened after it finished would look at it again.
PLAN = {
    "steps": [
        {"id": "a", "tool": "slow", "arguments": {"x": 1}},
        {"id": "b", "tool": "boom", "arguments": {"x": 2}},
    ]
}
LIMITS = RunLimits(failure_mode="fail_fast")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        pg: str = request.getfixturevalue("postgres_url")
        return pg
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


def _in_thread(work: Callable[[], Any]) -> None:
    """Run ``work`` on a thread of its own (its own event loop) and wait for it; re-raise what it raised."""
    failed: list[BaseException] = []

    def main() -> None:
        try:
            work()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    if failed:
        raise failed[0]


def _before_claim_update(store: Store, action: Callable[[], None]) -> list[str]:
    """Call ``action`` once, on ``store``'s database thread, just before it updates a run's owner."""
    fired: list[str] = []

    def hook(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        text = statement.lstrip().upper()
        if not fired and text.startswith("UPDATE TOOLPLAN_EXECUTIONS SET") and "OWNER=" in text:
            fired.append(statement)
            action()

    sa.event.listen(store.db.engine, "before_cursor_execute", hook)
    return fired


async def _final_state(url: str, run_id: str) -> tuple[str, list[tuple[str, Any]]]:
    async with open_store(url) as store:
        info = await store.get_run(run_id)
        events = await store.events(run_id)
    return info.summary.status, [(e.type, e.payload.get("status")) for e in events]


async def test_claim_next_leaves_a_run_that_finished_meanwhile(url: str) -> None:
    a, b = open_store(url), open_store(url)
    try:
        await a.submit(parse_plan(PLAN), limits=LIMITS, run_id="R")
        finished: list[PlanResult] = []

        def a_runs_it_to_the_end() -> None:  # another worker claims the run and finishes it
            async def go() -> None:
                async with open_store(url) as other:
                    assert await other.claim_next() == "R"
                    finished.append(await resume("R", TOOLS, store=other))

            _in_thread(lambda: asyncio.run(go()))

        fired = _before_claim_update(b, a_runs_it_to_the_end)
        claimed = await b.claim_next()
        assert fired, "the hook did not run: claim_next no longer updates toolplan_executions.owner"
        assert finished and finished[0].status == "failed"
        status, events = await _final_state(url, "R")
        assert status == "failed", f"claim_next reopened a finished run: its status is {status!r}"
        assert claimed is None, "claim_next returned a run that had finished"
        assert events[-1] == ("plan_finished", "failed")
    finally:
        await a.close()
        await b.close()


async def test_resume_does_not_take_a_run_that_finished_meanwhile(postgres_url: str) -> None:
    # PostgreSQL only: on SQLite the claim's transaction writes first (the plan row), so it holds
    # the database's write lock from its read to its update, and nobody can finish the run between.
    url = postgres_url
    b = open_store(url)
    try:
        owner_done = threading.Event()
        finished: list[PlanResult] = []

        def a_finishes_it() -> None:  # the run's owner ends it between B's read and B's update
            async def go() -> None:
                async with open_store(url) as other:
                    finished.append(await resume("R", TOOLS, store=other))

            _in_thread(lambda: asyncio.run(go()))
            owner_done.set()

        # The run is stored unfinished and free (queued), as a worker would find it.
        async with open_store(url) as first:
            await first.submit(parse_plan(PLAN), limits=LIMITS, run_id="R")
        fired = _before_claim_update(b, a_finishes_it)
        result = await resume("R", TOOLS, store=b)
        assert fired and owner_done.is_set()
        assert finished and finished[0].status == "failed"
        status, events = await _final_state(url, "R")
        assert status == "failed"
        # B found the run finished: it returns the stored result and writes nothing (no second end).
        assert [e for e in events if e[0] in ("plan_finished", "run_queued")] == [
            ("run_queued", "queued"),
            ("plan_finished", "failed"),
        ]
        assert result.status == "failed" and all(r.reused for r in result.steps.values()), result
        assert CALLS.count("boom") == 1
    finally:
        await b.close()
