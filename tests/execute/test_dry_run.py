"""Dry runs: what a plan would do, reported without calling a tool or writing a run."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolplan import (
    ApprovalRule,
    Budget,
    DryRunReport,
    PlanValidationError,
    Step,
    Tool,
    ToolDefinition,
    ToolRegistry,
    UserError,
    execute_plan,
    execute_plan_sync,
    tool,
)
from toolplan.store import open_store

CALLS: list[str] = []


@tool(read_only=True, idempotent=True, cost=2.0)
def lookup(city: str) -> dict[str, Any]:
    """Look a city up."""
    CALLS.append("lookup")
    return {"temp": 20, "city": city}


@tool(destructive=True, cost=5.0)
def delete_city(city: str) -> str:
    """Delete a city's record."""
    CALLS.append("delete_city")
    return "deleted"


@tool(read_only=True)
def mirror_a(city: str) -> str:
    """One mirror."""
    CALLS.append("mirror_a")
    return city


@tool(read_only=True, cost=3.0)
def mirror_b(city: str) -> str:
    """Another mirror."""
    CALLS.append("mirror_b")
    return city


def _schema_tool_fn(**arguments: Any) -> str:
    CALLS.append("remote_write")
    return "written"


# A tool made from a JSON Schema, as MCP servers' tools are.
remote_write = Tool.from_schema(
    "remote_write",
    "Write a note on a remote server.",
    {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]},
    _schema_tool_fn,
)

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "paris", "tool": "lookup", "arguments": {"city": "Paris"}, "rationale": "the weather"},
        {"id": "rome", "tool": "lookup", "arguments": {"city": "Rome"}},
        {"id": "note", "tool": "remote_write", "arguments": {"note": "Paris is {{paris.temp}}"}},
        {"id": "wipe", "tool": "delete_city", "arguments": {"city": "$ref:rome.city"}, "depends_on": ["note"]},
    ],
    "output_steps": ["wipe"],
}


def registry() -> ToolRegistry:
    r = ToolRegistry([lookup, delete_city, mirror_a, mirror_b, remote_write])
    r.add_group("mirror", ["mirror_a", "mirror_b"])
    return r


@pytest.fixture(autouse=True)
def _no_calls() -> Any:
    CALLS.clear()
    yield
    assert CALLS == []  # every test of this module: no tool was called


async def test_the_report_has_the_graph_the_steps_and_the_budget_and_no_tool_runs() -> None:
    report = await execute_plan(PLAN, registry(), dry_run=True)
    assert isinstance(report, DryRunReport)
    assert report.waves == (("paris", "rome"), ("note",), ("wipe",))
    assert report.critical_path == ("paris", "note", "wipe")
    assert report.destructive == ("wipe",) and not report.read_only
    assert report.needs_approval is None  # no rule given
    paris, note, wipe = report.steps["paris"], report.steps["note"], report.steps["wipe"]
    assert paris.literal and dict(paris.arguments) == {"city": "Paris"} and paris.rationale == "the weather"
    assert paris.annotations == ("read_only", "idempotent") and paris.calls == 3  # two automatic retries
    assert not note.literal and note.depends_on == ("paris",) and note.wave == 1
    assert wipe.depends_on == ("note", "rome") and wipe.destructive and wipe.calls == 1
    assert report.budget.calls == 3 + 3 + 1 + 1
    assert report.budget.calls_per_tool == {"lookup": 6, "remote_write": 1, "delete_city": 1}
    assert report.budget.cost == pytest.approx(6 * 2.0 + 1.0 + 5.0)
    assert report.budget.fits and report.output_steps == ("wipe",)
    assert report.expected_seconds is None and report.duration_note.startswith("unknown: no store")
    data = report.to_dict()
    assert data["dry_run"] is True and [s["id"] for s in data["steps"]] == ["paris", "rome", "note", "wipe"]
    assert data["steps"][2]["arguments"] == {"note": "Paris is {{paris.temp}}"}
    assert data["budget"]["fits"] is True and data["destructive"] == ["wipe"]


def test_the_sync_twin_and_the_limits_it_is_held_against() -> None:
    plan = {**PLAN, "budget": {"max_cost": 10}}
    report = execute_plan_sync(plan, registry(), dry_run=True, budget=Budget(max_tool_calls=4))
    b = report.budget
    assert b.limits.max_cost == 10 and b.limits.max_tool_calls == 4  # the plan's and the caller's, merged
    assert not b.fits
    assert b.over == ("up to 8 calls, over max_tool_calls=4", "a cost of up to 18, over max_cost=10")


async def test_alternatives_count_the_dearest_member_and_bind_each_members_limit() -> None:
    plan = {
        "policy": "thompson",
        "steps": [
            {"id": "g", "tool": "mirror", "arguments": {"city": "Oslo"}},
            {"id": "o", "tool": {"one_of": ["mirror_b", "mirror_a"]}, "arguments": {"city": "Bern"}},
        ],
    }
    budget = Budget(max_tool_calls_per_tool={"mirror_b": 1})
    report = await execute_plan(plan, registry(), dry_run=True, budget=budget)
    g = report.steps["g"]
    assert g.alternatives == ("mirror_a", "mirror_b") and g.cost == 3.0 and g.annotations == ("read_only",)
    assert report.steps["o"].alternatives == ("mirror_b", "mirror_a")
    assert report.budget.cost == 6.0
    assert report.budget.over == ("up to 2 calls of 'mirror_b', over its max_tool_calls_per_tool=1",)
    assert report.warnings == ()  # a dry run learns nothing, so it warns of nothing


async def test_an_invalid_plan_raises_as_a_run_would() -> None:
    bad = {"steps": [{"id": "a", "tool": "nope", "arguments": {}}, {"id": "b", "tool": "lookup", "arguments": {}}]}
    with pytest.raises(PlanValidationError) as caught:
        await execute_plan(bad, registry(), dry_run=True)
    assert {i.code for i in caught.value.issues} >= {"unknown_tool"}


async def test_options_a_dry_run_cannot_use_are_refused() -> None:
    with pytest.raises(UserError, match="takes no run_id"):
        await execute_plan(PLAN, registry(), dry_run=True, run_id="r1")
    with pytest.raises(UserError, match="needs_approval"):
        await execute_plan(PLAN, registry(), dry_run=True, approval=object())  # type: ignore[call-overload]


async def test_an_approval_rule_marks_the_steps_that_would_wait() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def writes_a_note(step: Step, tool: ToolDefinition, arguments: Mapping[str, Any]) -> bool:
        asked.append((step.id, dict(arguments)))
        return tool.name == "remote_write"

    rule = ApprovalRule(destructive=True, when=writes_a_note)
    report = await execute_plan(PLAN, registry(), dry_run=True, approval=rule)
    assert report.needs_approval == ("note", "wipe")
    assert [s.needs_approval for s in report.steps.values()] == [False, False, True, True]
    assert ("note", {"note": "Paris is {{paris.temp}}"}) in asked  # the arguments as written: nothing ran
    assert report.to_dict()["needs_approval"] == ["note", "wipe"]


async def test_a_store_gives_the_expected_duration_and_gets_no_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plain = {"steps": [{"id": "a", "tool": "lookup", "arguments": {"city": "Oslo"}}]}
    async with open_store(url) as store:
        before = await execute_plan(plain, registry(), store=store, dry_run=True)
        assert before.expected_seconds is None and "no latency" in before.duration_note
        assert await store.list_runs() == []
        result = await execute_plan(plain, registry(), store=store)  # a real run: its latency is stored
        assert result.ok
        CALLS.clear()
        took = result.steps["a"].duration or 0.0
        runs = await store.list_runs()
        report = await execute_plan(PLAN, registry(), store=store, dry_run=True)
        assert await store.list_runs() == runs  # the dry run stored nothing
        assert report.steps["paris"].expected_seconds == pytest.approx(took, abs=1e-6)
        assert report.steps["note"].expected_seconds is None  # remote_write never ran
        assert report.expected_seconds is None
        assert report.duration_note == "unknown: the store has no latency of delete_city, remote_write"
        only_lookups = {"steps": [PLAN["steps"][0], PLAN["steps"][1]]}
        known = await execute_plan(only_lookups, registry(), store=store, dry_run=True)
        assert known.expected_seconds == pytest.approx(took, abs=1e-6)
        assert known.duration_note.startswith("the critical path, by the mean latency")
        assert known.budget.fits
        expected = known.expected_seconds or 0.0
        late = await execute_plan(only_lookups, registry(), store=store, dry_run=True, timeout=expected / 2)
        assert late.budget.over == (f"an expected duration of {expected:.3g}s, over the deadline of {expected / 2:g}s",)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from toolplan_executions")).scalar() == 1
    engine.dispose()


@pytest.mark.slow  # a Python process of its own
def test_the_example_runs(tmp_path: Path, run_example: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = run_example("examples/dry_run/dry_run.py", f"sqlite:///{tmp_path / 'd.db'}")
    lines = done.stdout.splitlines()
    assert "waves: [['orders', 'profile'], ['cancel']]" in lines
    assert "destructive: ['cancel']" in lines
    assert "budget: up to 5 calls, cost 10; over: ['up to 5 calls, over max_tool_calls=4']" in lines
    assert "duration: unknown: the store has no latency of any of the plan's tools yet" in lines
    assert any(line.startswith("ran: succeeded ['cancel_order', 'fetch_orders', 'mirror_") for line in lines)
    assert lines[-1].startswith("expected duration now: ") and "unknown" not in lines[-1]
