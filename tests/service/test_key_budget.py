"""A budget window per API key in the service: refusals on results, GET /v1/budget, GraphQL keyBudget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from svc_support import ProcessServer, ThreadServer

from toolplan.execute import WindowLimits
from toolplan.service import ServiceConfig

PLAN = {"steps": [{"id": f"s{i}", "tool": "add", "arguments": {"a": i, "b": 1}} for i in range(3)]}


def _run(c: Any) -> dict[str, Any]:
    plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
    out: dict[str, Any] = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30}).json()
    return out


def test_a_keys_window_refuses_calls_across_executions_and_says_so(
    thread_server: Callable[..., ThreadServer], db_url: str
) -> None:
    config = ServiceConfig(key_budget=WindowLimits(period=86_400, max_tool_calls=4))
    server = thread_server(db_url, config=config)
    with server.client() as c:
        first = _run(c)
        assert first["status"] == "succeeded" and first["refused"] == []
        second = _run(c)
        # One call was left in the window: one of the three parallel steps (whichever reserved first) gets it.
        statuses = {s["id"]: s["status"] for s in second["steps"]}
        assert sorted(statuses.values()) == ["not_run", "not_run", "succeeded"]
        assert [r["step_id"] for r in second["refused"]] == [k for k, v in statuses.items() if v == "not_run"]
        assert second["refused"][0]["message"].startswith(
            "Budget window exhausted: max_tool_calls=4 per 86400s for this key, 4 already made."
        )
        budget = c.get("/v1/budget").json()["key_budget"]
        assert (budget["calls"], budget["max_tool_calls"], budget["calls_left"]) == (4, 4, 0)
        assert budget["window_end"] - budget["window_start"] == 86_400
        gql = c.post("/graphql", json={"query": "{ keyBudget { calls callsLeft maxCost } }"}).json()
        assert gql == {"data": {"keyBudget": {"calls": 4, "callsLeft": 0, "maxCost": None}}}
        execution = c.post(
            "/graphql",
            json={
                "query": f'{{ execution(executionId: "{second["execution_id"]}") {{ refused {{ stepId message }} }} }}'
            },
        ).json()["data"]["execution"]
        assert execution["refused"] == [{"stepId": r["step_id"], "message": r["message"]} for r in second["refused"]]


def test_without_a_key_budget_the_budget_endpoint_says_none(server: ThreadServer) -> None:
    with server.client() as c:
        assert c.get("/v1/budget").json() == {"key_budget": None}
        assert c.post("/graphql", json={"query": "{ keyBudget { calls } }"}).json() == {"data": {"keyBudget": None}}


@pytest.mark.slow
def test_serve_takes_key_budget_options(spawn: Callable[..., ProcessServer], db_url: str) -> None:
    server = spawn(db_url, "--key-budget-calls", "2", "--key-budget-cost", "10", "--key-budget-period", "60")
    with server.client() as c:
        result = _run(c)
        assert [s["status"] for s in result["steps"]] == ["succeeded", "succeeded", "not_run"]
        budget = c.get("/v1/budget").json()["key_budget"]
        assert (budget["calls"], budget["max_cost"], budget["cost_left"]) == (2, 10, 8.0)
