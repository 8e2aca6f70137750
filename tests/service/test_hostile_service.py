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


def test_a_lone_surrogate_in_a_posted_plan_is_refused_before_it_is_stored(server: ThreadServer) -> None:
    raw = '{"plan": {"steps": [{"id": "a", "tool": "gate", "arguments": {"name": "x\\ud800"}}]}}'
    bad_query = '{"query": "weather in \\udc00 Paris"}'
    with server.client() as c:
        for headers in ({}, {"Idempotency-Key": "surrogate-1"}):
            r = c.post("/v1/plans", content=raw, headers={"Content-Type": "application/json", **headers})
            assert r.status_code == 400 and r.json()["code"] == "invalid_text", r.text
            assert "plan.steps[0].arguments.name" in r.json()["message"]
        assert c.get("/v1/plans").json()["items"] == []  # nothing stored
        r = c.post("/v1/requests", content=bad_query, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["code"] == "invalid_request", r.text  # a str field: pydantic's


def test_an_event_number_past_the_stores_range_is_refused_before_streaming(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        execution_id = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30}).json()["execution_id"]
        url = f"/v1/executions/{execution_id}/events"
        for big in (2**63, 2**64, 10**30):
            for r in (c.get(url, params={"after": big}), c.get(url, headers={"Last-Event-ID": str(big)})):
                assert r.status_code == 400 and r.json()["code"] == "invalid_event_id", r.text
        r = c.get(url, params={"after": 2**63 - 1})  # the largest number: nothing after it, an empty stream
        assert r.status_code == 200 and "event:" not in r.text
