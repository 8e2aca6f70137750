"""Calls made inside `skill:NAME` steps count against the calling run's budget and budget window."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolplan import Budget, RunLimits, execute_plan, tool
from toolplan.agent import Agent
from toolplan.execute import MemoryWindow, WindowCharge, WindowLimits
from toolplan.models import AssistantMessage, ToolCall
from toolplan.skills import SkillTools
from toolplan.store import open_store
from toolplan.testing import ScriptedModel

PAID: list[int] = []


@tool(cost=1.0)
def paid(i: int) -> int:
    """A call that costs one unit."""
    PAID.append(i)
    return i


FAN = {"steps": [{"id": f"c{i}", "tool": "paid", "arguments": {"i": i}} for i in range(10)]}
ONE = {"steps": [{"id": "c", "tool": "paid", "arguments": {"i": 0}}]}
FANS = {"steps": [{"id": f"f{i}", "tool": "skill:fan", "arguments": {}} for i in range(3)]}


async def _skills(tmp_path: Path) -> tuple[Any, SkillTools]:
    store = open_store(f"sqlite:///{tmp_path / 'skills.db'}")
    skills = SkillTools(store, [paid])
    await skills.skill_create("fan", "Ten paid calls", FAN, {})
    await skills.skill_create("one", "One paid call", ONE, {})
    await skills.skill_create("twice", "A skill calling a skill twice", {
        "steps": [{"id": "a", "tool": "skill:one", "arguments": {}}, {"id": "b", "tool": "skill:one", "arguments": {}}]
    }, {})  # fmt: skip
    return store, skills


async def test_skill_steps_cannot_spend_past_the_callers_budget_or_window(tmp_path: Path) -> None:
    PAID.clear()
    store, skills = await _skills(tmp_path)
    async with store:
        window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=2))
        limits = RunLimits(budget=Budget(max_tool_calls=2, max_cost=2), window=WindowCharge(window, "key"))
        result = await execute_plan(FANS, [paid, skills], limits=limits)
        assert PAID == []  # no skill's plan fits in what is left: none of its calls is made
        statuses = [result.steps[f"f{i}"].status for i in range(3)]
        assert statuses == ["failed", "failed", "not_run"]
        error = result.steps["f0"].error
        assert error is not None and error.kind == "business"
        assert "needs up to 10 calls, and the calling run has 0 left of max_tool_calls=2" in error.message
        assert (await window.usage("key")).calls == 2  # the two skill steps; nothing escaped it


async def test_nested_calls_are_charged_to_the_callers_ledger_and_window(tmp_path: Path) -> None:
    PAID.clear()
    store, skills = await _skills(tmp_path)
    async with store:
        window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=100))
        plan = {
            "steps": [
                {"id": "t", "tool": "skill:twice", "arguments": {}},
                {"id": "p", "tool": "paid", "arguments": {"i": 9}},
            ]
        }
        # skill:twice, the plan's paid, two skill:one inside twice, one paid inside each: 6 calls.
        limits = RunLimits(budget=Budget(max_tool_calls=6), window=WindowCharge(window, "key"))
        result = await execute_plan(plan, [paid, skills], limits=limits)
        assert result.ok, result.errors
        assert (await window.usage("key")).calls == 6 and len(PAID) == 3
        tight = await execute_plan(plan, [paid, skills], limits=RunLimits(budget=Budget(max_tool_calls=5)))
        assert not tight.ok and len(PAID) == 3 + 2  # the plan's paid and one skill:one's paid


async def test_a_window_alone_bounds_calls_made_inside_skills(tmp_path: Path) -> None:
    PAID.clear()
    store, skills = await _skills(tmp_path)
    async with store:
        window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=4))
        result = await execute_plan(FANS, [paid, skills], limits=RunLimits(window=WindowCharge(window, "key")))
        # The three skill steps start at once (3 calls); one paid call fits in what is left.
        assert (await window.usage("key")).calls == 4 and len(PAID) == 1
        assert [result.steps[f"f{i}"].status for i in range(3)] == ["failed"] * 3


async def test_an_agents_budget_counts_the_calls_inside_its_skills(tmp_path: Path) -> None:
    PAID.clear()
    store, skills = await _skills(tmp_path)
    async with store:
        model = ScriptedModel(
            [AssistantMessage(tool_calls=(ToolCall(id="1", name="skill_run", arguments='{"name": "fan"}'),)), "done"]
        )
        agent = Agent(model, tools=[paid, skills], limits=RunLimits(budget=Budget(max_tool_calls=5)))
        await agent.run("fan out")
        assert PAID == []


def test_the_scenario_runs_synchronously_too(tmp_path: Path) -> None:
    asyncio.run(test_skill_steps_cannot_spend_past_the_callers_budget_or_window(tmp_path))
