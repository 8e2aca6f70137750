"""Status reads: a view made once is answered again while the execution is unchanged, and made again when it moves.

And the runner's claim: the resume takes up what `Store.claim_next` read, once (a real SQLite file).
"""

from __future__ import annotations

from json import loads

from svc_tools import TOOLS

from toolplan.execute import RunLimits
from toolplan.plan import validate_plan
from toolplan.service._core import execution_view
from toolplan.service._store import ServiceStore
from toolplan.service._views import Views
from toolplan.store import open_store, resume

PLAN = {"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]}


async def test_a_view_is_answered_again_until_the_execution_moves(db_url: str) -> None:
    report = validate_plan(PLAN, TOOLS)
    assert report.plan is not None
    async with open_store(db_url) as store:
        data = ServiceStore(store)
        views = Views(data, execution_view)
        await data.enqueue("ex_1", report.plan, RunLimits(), source_plan_id=None, api_key=None, max_active=None)
        first = await views.execution("ex_1")
        assert loads(first)["status"] == "queued"
        assert await views.execution("ex_1") is first  # nothing changed: the same bytes, not made again

        await data.request_cancel("ex_1")  # a change of the row alone (no step moved)
        cancelled = await views.execution("ex_1")
        assert loads(cancelled)["status"] == "cancelled"

        await data.requeue("ex_1")
        assert await store.claim_next() == "ex_1"
        result = await resume("ex_1", TOOLS, store=store)
        assert result.ok
        done = loads(await views.execution("ex_1"))
        assert done["status"] == "succeeded" and done["outputs"] == {"a": 3}
        assert [s["status"] for s in done["steps"]] == ["succeeded"]


async def test_a_claimed_run_is_taken_up_once_with_a_new_session(db_url: str) -> None:
    report = validate_plan(PLAN, TOOLS)
    assert report.plan is not None
    async with open_store(db_url) as store:
        data = ServiceStore(store)
        await data.enqueue("ex_2", report.plan, RunLimits(), source_plan_id=None, api_key=None, max_active=None)
        assert await store.claim_next() == "ex_2"
        assert (await store.get_run("ex_2")).summary.owner == store.owner
        result = await resume("ex_2", TOOLS, store=store)
        assert result.ok and result.outputs == {"a": 3}
        kinds = [e.type for e in await store.events("ex_2")]
        assert kinds == ["plan_started", "run_queued", "run_started", "step_started", "step_finished", "plan_finished"]
        info = await store.get_run("ex_2")
        assert info.summary.owner is None and info.summary.status == "succeeded"
