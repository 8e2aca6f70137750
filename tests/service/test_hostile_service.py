"""Hostile tools in the service: a timed-out read whose thread fails later ends the execution failed."""

from __future__ import annotations

from svc_support import ThreadServer

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
