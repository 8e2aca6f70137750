"""A durable run of steps on one resource, with `after`: cut off mid-way, resumed, still in plan order."""

from __future__ import annotations

import asyncio

import pytest

from toolplan import execute_plan, tool
from toolplan.store import open_store, resume

LOG: list[str] = []
GATE: dict[str, asyncio.Event] = {}


@tool(resource="disk", idempotent=True, retry=0)
async def write(name: str) -> str:
    """Write a file (on the shared disk)."""
    LOG.append(f"write {name}")
    if name == "b" and "entered" in GATE and not GATE["entered"].is_set():
        GATE["entered"].set()
        await asyncio.Event().wait()  # the first run is cut off here
    if name == "bad":
        raise OSError("disk full")
    return name


@tool
def report(text: str) -> str:
    """Report (no shared state)."""
    LOG.append(f"report {text}")
    return text


PLAN = {
    "steps": [
        {"id": "a", "tool": "write", "arguments": {"name": "a"}},
        {"id": "x", "tool": "write", "arguments": {"name": "bad"}},
        {"id": "b", "tool": "write", "arguments": {"name": "b"}},
        {"id": "c", "tool": "write", "arguments": {"name": "c"}},
        {"id": "r", "tool": "report", "arguments": {"text": "done"}, "after": ["c", "x"]},
    ]
}


async def test_a_resumed_run_keeps_the_resource_order_and_the_after_edges(store_url: str) -> None:
    LOG.clear()
    GATE["entered"] = asyncio.Event()
    async with open_store(store_url) as store:
        task = asyncio.create_task(execute_plan(PLAN, [write, report], store=store, run_id="disk-1"))
        await GATE["entered"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert LOG == ["write a", "write bad", "write b"]
    async with open_store(store_url) as store:
        result = await resume("disk-1", [write, report], store=store)
    # a and x were reused; b (idempotent, in flight) runs again, then c, then the report.
    assert LOG == ["write a", "write bad", "write b", "write b", "write c", "report done"]
    assert {sid: r.status for sid, r in result.steps.items()} == {
        "a": "succeeded",
        "x": "failed",
        "b": "succeeded",
        "c": "succeeded",
        "r": "succeeded",
    }
