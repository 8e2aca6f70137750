"""An Idempotency-Key's response kept in the transaction that stores a plan (a real SQLite file)."""

from __future__ import annotations

import pytest
from svc_tools import TOOLS

from toolplan import PlanNotFoundError, StoreError
from toolplan.plan import validate_plan
from toolplan.service._keep import Finish
from toolplan.service._store import ServiceStore
from toolplan.store import open_store

PLAN = {"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]}


async def test_a_new_key_is_recorded_done_with_the_plan_and_a_known_one_stores_nothing(db_url: str) -> None:
    report = validate_plan(PLAN, TOOLS)
    assert report.plan is not None
    async with open_store(db_url) as store:
        data = ServiceStore(store)
        first = Finish("k1", "idem", fingerprint="f", reserved_id="plan_1")
        await data.save_plan("plan_1", report.plan, keep=(first, 201, {"plan_id": "plan_1"}))
        assert first.kept == (201, {"plan_id": "plan_1"})
        replay = await data.claim_idempotency("k1", "idem", "f", "plan_other")
        assert (replay.state, replay.reserved_id, replay.status_code) == ("done", "plan_1", 201)
        assert replay.response == {"plan_id": "plan_1"}

        # The same key again, unclaimed: the transaction fails on the key and keeps no second plan.
        second = Finish("k1", "idem", fingerprint="f", reserved_id="plan_2")
        with pytest.raises(StoreError):  # the database's unique-key error, as the store reports it
            await data.save_plan("plan_2", report.plan, keep=(second, 201, {"plan_id": "plan_2"}))
        assert second.kept is None
        assert (await data.plan_info("plan_1"))["plan"] is not None
        with pytest.raises(PlanNotFoundError):
            await data.plan_info("plan_2")

        # A key claimed first (the usual way) is finished in the write's transaction.
        claimed = await data.claim_idempotency("k1", "other", "g", "plan_3")
        assert claimed.state == "new"
        finish = Finish("k1", "other")
        await data.save_plan("plan_3", report.plan, keep=(finish, 201, {"plan_id": "plan_3"}))
        again = await data.claim_idempotency("k1", "other", "g", "plan_x")
        assert finish.kept is not None and (again.state, again.status_code) == ("done", 201)
