"""`LiveFeed`: a local run's events in the service's JSON shape, the same records a durable run stores."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from toolplan import ToolError, execute_plan, tool
from toolplan._ui import LiveFeed, graph_view
from toolplan.plan import validate_plan
from toolplan.policy import ToolPolicy
from toolplan.store import open_store

_calls: dict[str, int] = {}


@tool(idempotent=True)
def flaky(name: str) -> str:
    """Fail on the first call (an infrastructure error, retried), then succeed."""
    _calls[name] = _calls.get(name, 0) + 1
    if _calls[name] == 1:
        raise ConnectionError(f"{name} is not ready yet")
    return f"{name} ok"


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def broken(reason: str) -> int:
    """Fail."""
    raise ToolError(reason)


TOOLS = [flaky, add, broken]
PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "r", "tool": "flaky", "arguments": {"name": "r"}, "retry": 1},
        {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}, "depends_on": ["r"]},
        {"id": "x", "tool": "broken", "arguments": {"reason": "no such city: Atlantis"}},
        {"id": "y", "tool": "add", "arguments": {"a": "$ref:x", "b": 1}},
    ],
    "output_steps": ["b", "y"],
}


def _shape(records: list[dict[str, Any]]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(type, step, payload) of each record, in a stable order (the plan_id a store adds left out)."""
    out = []
    for r in records:
        payload = {k: v for k, v in r["payload"].items() if k != "plan_id"}
        if r["type"] == "step_retrying":
            payload.pop("delay")  # jittered
        out.append((r["type"], r["step_id"], payload))
    return sorted(out, key=repr)


async def test_the_feed_records_what_a_durable_run_stores(tmp_path: Path) -> None:
    compiled = validate_plan(PLAN, TOOLS).compiled
    assert compiled is not None
    _calls.clear()
    feed = LiveFeed("local", compiled)
    await execute_plan(PLAN, TOOLS, on_event=feed, retry_delay=0)
    _calls.clear()
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        result = await execute_plan(PLAN, TOOLS, store=store, run_id="stored", retry_delay=0)
        stored = [
            {"type": e.type, "step_id": e.step_id, "payload": e.payload, "seq": e.seq}
            for e in await store.events("stored")
        ]
    records, ended = feed.wait(0, 0)
    assert ended and records[-1]["type"] == "plan_finished"
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert _shape(records) == _shape(stored)
    assert {r["type"] for r in records} == {
        "plan_started",
        "step_started",
        "step_retrying",
        "step_finished",
        "plan_finished",
    }
    view = feed.execution()
    assert view["status"] == result.status == "failed"
    assert view["outputs"] == {"b": 13}
    by_id = {s["id"]: s for s in view["steps"]}
    assert list(by_id) == ["a", "r", "b", "x", "y"]
    assert by_id["r"]["attempts"] == 2 and by_id["r"]["status"] == "succeeded"
    assert by_id["x"]["error"] == {"kind": "business", "message": "no such city: Atlantis"}
    assert by_id["y"]["status"] == "skipped" and by_id["b"]["output"] == 13


def test_before_the_run_every_step_is_pending_and_readers_wait() -> None:
    compiled = validate_plan(PLAN, TOOLS).compiled
    assert compiled is not None
    feed = LiveFeed("r1", compiled)
    view = feed.execution()
    assert view["status"] == "queued" and {s["status"] for s in view["steps"]} == {"pending"}
    assert feed.wait(0, 0) == ([], False)
    got: list[tuple[list[dict[str, Any]], bool]] = []
    reader = threading.Thread(target=lambda: got.append(feed.wait(0, 60)))
    reader.start()
    feed.close()  # wakes the reader at once, and ends its stream
    reader.join(30)
    assert got == [([], True)]


def test_the_graph_view_lists_steps_with_their_dependencies() -> None:
    compiled = validate_plan(PLAN, TOOLS).compiled
    assert compiled is not None
    view = graph_view("e1", compiled)
    assert view == graph_view("e1", compiled.plan)  # from a stored plan, the same
    assert view["execution_id"] == "e1" and view["output_steps"] == ["b", "y"]
    deps = {s["id"]: set(s["deps"]) for s in view["steps"]}
    assert deps == {"a": set(), "r": set(), "b": {"a", "r"}, "x": set(), "y": {"x"}}
    assert [s["tool"] for s in view["steps"]] == ["add", "flaky", "add", "broken", "add"]


@tool
def search_a(q: str) -> str:
    """Search one way."""
    return f"a: {q}"


@tool
def search_b(q: str) -> str:
    """Search another way."""
    return f"b: {q}"


async def test_every_engine_event_reaches_the_feed_as_a_durable_run_stores_it(tmp_path: Path) -> None:
    # A step among alternatives (tool_chosen) and a budget that warns (budget_warning: not stored).
    plan: dict[str, Any] = {
        "steps": [
            {"id": "s", "tool": {"one_of": ["search_a", "search_b"]}, "arguments": {"q": "x"}},
            {"id": "t", "tool": "add", "arguments": {"a": 1, "b": 2}},
        ],
        "budget": {"max_tool_calls": 4, "warn_at": 0.25},
    }
    tools = [search_a, search_b, add]
    compiled = validate_plan(plan, tools).compiled
    assert compiled is not None
    feed = LiveFeed("local", compiled)
    kinds: list[str] = []

    def both(event: Any) -> None:
        kinds.append(event.kind)
        feed(event)

    result = await execute_plan(plan, tools, on_event=both, policy=ToolPolicy("greedy", seed=0))
    assert result.status == "succeeded" and {"tool_chosen", "budget_warning"} <= set(kinds)
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        await execute_plan(plan, tools, store=store, run_id="stored", policy=ToolPolicy("greedy", seed=0))
        stored = [{"type": e.type, "step_id": e.step_id, "payload": e.payload} for e in await store.events("stored")]
    records, ended = feed.wait(0, 0)
    assert ended
    assert {r["type"] for r in records} == {r["type"] for r in stored} >= {"tool_chosen"}
    chosen = [r for r in records if r["type"] == "tool_chosen"]
    assert [(r["step_id"], r["payload"]["chosen"]) for r in chosen] == [
        (r["step_id"], r["payload"]["chosen"]) for r in stored if r["type"] == "tool_chosen"
    ]
