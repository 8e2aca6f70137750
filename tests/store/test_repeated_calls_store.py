"""Repeated calls in a real store: shared records both ways, a resume takes a stored call, the cache in the database."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolplan import ResultCache, execute_plan, tool
from toolplan.plan import parse_plan
from toolplan.store import open_store, resume
from toolplan.store._codec import encode

CALLS: Counter[str] = Counter()
GATE: dict[str, asyncio.Event] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    GATE.clear()


@tool(read_only=True, idempotent=True)
def weather(city: str) -> dict[str, Any]:
    """Weather (read-only)."""
    CALLS[city] += 1
    return {"city": city, "temp": len(city)}


@tool(idempotent=True)
async def hold(n: int) -> int:
    """The first call hangs until its run is cancelled."""
    CALLS["hold"] += 1
    if CALLS["hold"] == 1:
        GATE["entered"].set()
        await asyncio.Event().wait()
    return n


TOOLS = [weather, hold]


async def test_shared_records_are_stored_and_read_back_both_ways(store_url: str) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}},
            {"id": "b", "tool": "weather", "arguments": {"city": "Oslo"}, "depends_on": ["a"]},
        ]
    }
    async with open_store(store_url) as store:
        result = await execute_plan(plan, TOOLS, store=store, run_id="shared-1")
        info = await store.get_run("shared-1")
    assert CALLS["Oslo"] == 1 and result.steps["a"].shared_with == ("b",)
    stored = info.result.steps
    assert stored["a"].shared_with == ("b",) and stored["b"].shared_with == ("a",)
    assert stored["b"].attempts == 0 and stored["b"].output == {"city": "Oslo", "temp": 4}


async def test_a_resume_takes_a_stored_call_instead_of_calling_again(store_url: str) -> None:
    GATE["entered"] = asyncio.Event()
    plan = {
        "steps": [
            {"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}},
            {"id": "h", "tool": "hold", "arguments": {"n": 1}, "depends_on": ["a"]},
            {"id": "b", "tool": "weather", "arguments": {"city": "Oslo"}, "depends_on": ["h"]},
        ]
    }
    async with open_store(store_url) as store:
        task = asyncio.create_task(execute_plan(plan, TOOLS, store=store, run_id="shared-2"))
        await GATE["entered"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    async with open_store(store_url) as store:
        result = await resume("shared-2", TOOLS, store=store)
    assert result.ok and CALLS["Oslo"] == 1 and CALLS["hold"] == 2
    assert result.steps["a"].reused and result.steps["b"].shared_with == ("a",)
    assert result.steps["a"].shared_with == ("b",)


async def test_a_cache_in_the_store_is_seen_by_another_store_object(store_url: str) -> None:
    plan = {"steps": [{"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}}]}
    async with open_store(store_url) as store:
        first = await execute_plan(plan, TOOLS, cache=ResultCache(ttl=60, store=store))
    async with open_store(store_url) as store:
        second = await execute_plan(plan, TOOLS, cache=ResultCache(ttl=60, store=store), store=store, run_id="c1")
        info = await store.get_run("c1")
        events = [e.type for e in await store.events("c1")]
    assert CALLS["Oslo"] == 1 and not first.steps["a"].cached
    assert second.steps["a"].cached and second.steps["a"].output == {"city": "Oslo", "temp": 4}
    assert info.result.steps["a"].cached and "cache_hit" in events


def test_a_plan_that_does_not_turn_sharing_off_encodes_as_before() -> None:
    on = parse_plan({"steps": [{"id": "a", "tool": "weather", "arguments": {}}]})
    off = parse_plan({"steps": [{"id": "a", "tool": "weather", "arguments": {}}], "share_calls": False})
    assert off.share_calls is False and off.to_dict()["share_calls"] is False
    assert "share_calls" not in encode(on) and '"share_calls":false' in encode(off)


@pytest.mark.slow  # a Python process of its own
def test_the_example_makes_one_call_per_city_then_none(
    tmp_path: Path, run_example: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    done = run_example("examples/repeated_calls/repeated_calls.py", f"sqlite:///{tmp_path / 'c.db'}")
    first, second = done.stdout.split("run 2:")
    assert "weather calls made: 2 (Oslo, Rome)" in first
    assert "oslo_again  succeeded  calls=0  shared with oslo" in first
    assert "weather calls made: 0 (none)" in second
    assert "cache hit: rome (weather)" in second


async def test_a_version_9_database_is_migrated_and_keeps_its_runs(store_url: str) -> None:
    import sqlalchemy as sa

    plan = {"steps": [{"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}}]}
    async with open_store(store_url) as store:
        await execute_plan(plan, TOOLS, store=store, run_id="v9")
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:  # back to schema version 9, before repeated calls were stored
        for column in ("shared_with", "cached"):
            conn.execute(sa.text(f"ALTER TABLE toolplan_steps DROP COLUMN {column}"))
        conn.execute(sa.text("DROP TABLE toolplan_result_cache"))
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '9' WHERE key = 'schema_version'"))
    async with open_store(store_url) as store:
        info = await store.get_run("v9")
        again = await execute_plan(plan, TOOLS, cache=ResultCache(ttl=60, store=store))
        cached = await execute_plan(plan, TOOLS, cache=ResultCache(ttl=60, store=store))
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT value FROM toolplan_meta WHERE key = 'schema_version'")).scalar()
    engine.dispose()
    assert version == "13"
    assert info.result.steps["a"].ok and info.result.steps["a"].shared_with == () and not info.result.steps["a"].cached
    assert again.ok and cached.steps["a"].cached and CALLS["Oslo"] == 2
