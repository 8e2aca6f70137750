"""Hostile tools in the service: a late thread failure ends the execution failed; skills keep to budgets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from svc_support import ThreadServer

from toolplan import tool
from toolplan.execute import WindowLimits
from toolplan.service import ServiceConfig
from toolplan.skills import SkillTools
from toolplan.store import Store

PLAN = {
    "steps": [
        {"id": "late", "tool": "late_failure", "arguments": {}},
        {"id": "sum", "tool": "add", "arguments": {"a": 1, "b": 2}},
    ]
}


def test_a_late_thread_failure_ends_the_execution_failed_not_cancelled(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        body = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30}).json()
        assert body["status"] == "failed"
        steps = {s["id"]: s for s in body["steps"]}
        assert steps["sum"]["status"] == "succeeded" and steps["sum"]["output"] == 3
        assert steps["late"]["status"] == "timed_out" and steps["late"]["attempts"] == 3
        assert c.get(f"/v1/executions/{body['execution_id']}").json()["status"] == "failed"


PAID: list[int] = []


@tool(cost=1.0)
def paid(i: int) -> int:
    """A call that costs one unit."""
    PAID.append(i)
    return i


FAN = {"steps": [{"id": f"c{i}", "tool": "paid", "arguments": {"i": i}} for i in range(10)]}


def test_calls_inside_skill_steps_count_against_the_plan_budget_and_the_keys_window(
    thread_server: Callable[..., ThreadServer], db_url: str
) -> None:
    async def tools(store: Store) -> list[Any]:
        skills = SkillTools(store, [paid])
        await skills.skill_create("fan", "Ten paid calls", FAN, {})
        return [paid, skills]

    PAID.clear()
    config = ServiceConfig(poll_interval=0.05, key_budget=WindowLimits(period=86_400, max_tool_calls=2))
    server = thread_server(db_url, config=config, tools=tools)
    plan = {
        "steps": [{"id": f"f{i}", "tool": "skill:fan", "arguments": {}} for i in range(3)],
        "budget": {"max_tool_calls": 2, "max_cost": 2},
    }
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": plan}).json()["plan_id"]
        body = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30}).json()
        assert body["status"] == "failed"
        assert PAID == []  # no skill's ten calls fit in what the plan and the key had left
        assert c.get("/v1/budget").json()["key_budget"]["calls"] == 2
