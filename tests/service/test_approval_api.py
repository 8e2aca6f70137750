"""Approval through the service: an execution started with a rule waits, is answered over REST, goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from svc_support import ThreadServer

from toolplan.service._internal import ServiceStore
from toolplan.store import open_store

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "pay", "tool": "charge", "arguments": {"amount": "$ref:a"}},
        {"id": "after", "tool": "add", "arguments": {"a": 1, "b": 1}, "depends_on": ["pay"]},
    ],
    "output_steps": ["pay", "after"],
}
RULE = {"tools": ["charge"]}


def _ledger(gates: Path) -> list[str]:
    path = gates.parent / "ledger.txt"
    return path.read_text().split() if path.exists() else []


def _start_waiting(c: httpx.Client) -> dict[str, Any]:
    plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
    r = c.post(f"/v1/plans/{plan_id}/executions?wait=20", json={"approval": RULE})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["status"] == "pending_approval", body
    return body


def test_a_waiting_execution_shows_its_request_and_goes_on_when_approved(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        waiting = _start_waiting(c)
        eid = waiting["execution_id"]
        request = waiting["approval"]
        [pending] = request["steps"]
        assert pending["step_id"] == "pay" and pending["tool"] == "charge"
        assert pending["arguments"] == {"amount": 3} and pending["dependents"] == ["after"]
        assert _ledger(gates) == []  # nothing charged yet
        assert c.get(f"/v1/executions/{eid}").json()["approval"]["steps"][0]["step_id"] == "pay"
        listed = c.get("/v1/executions?status=pending_approval").json()["items"]
        assert [e["id"] if "id" in e else e["execution_id"] for e in listed] == [eid]

        # Edited arguments that do not fit the tool: 400, nothing changes.
        bad = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"approve": True, "arguments": {}}}})
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_approval", bad.text
        unknown = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"a": {"approve": True}}})
        assert unknown.status_code == 400 and unknown.json()["code"] == "invalid_approval"
        neither = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {}}})
        assert neither.status_code == 400 and neither.json()["code"] == "invalid_approval"
        assert c.get(f"/v1/executions/{eid}").json()["status"] == "pending_approval"

        answer = {"answers": {"pay": {"approve": True, "arguments": {"amount": 7}}}}
        r = c.post(f"/v1/executions/{eid}/approvals", json=answer)
        assert r.status_code == 202 and r.json()["status"] == "queued", r.text
        done = _wait_settled(c, eid)
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"pay": "charged 7", "after": 2}
        assert _ledger(gates) == ["7"]  # called once, with the edited arguments
        again = c.post(f"/v1/executions/{eid}/approvals", json=answer)
        assert again.status_code == 409
        types = [e["type"] for e in _events(c, eid)]
        assert "approval_requested" in types and "approval_answered" in types and types[-1] == "plan_finished"


def test_a_rejected_step_ends_rejected_and_its_dependents_are_skipped(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        eid = _start_waiting(c)["execution_id"]
        r = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"reject": "too much"}}})
        assert r.status_code == 202, r.text
        done = _wait_settled(c, eid)
        statuses = {s["id"]: s["status"] for s in done["steps"]}
        assert statuses == {"a": "succeeded", "pay": "rejected", "after": "skipped"}, done
        assert _ledger(gates) == []


def test_a_key_without_the_approve_permission_gets_403(server: ThreadServer, db_url: str, gates: Path) -> None:
    async def make() -> str:
        async with open_store(db_url) as store:
            _, secret = await ServiceStore(store).create_key("runner", can_approve=False)
            return secret

    runner_key = asyncio.run(make())
    with server.client(key=runner_key) as c:
        eid = _start_waiting(c)["execution_id"]  # it may run
        r = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"approve": True}}})
        assert r.status_code == 403 and r.json()["code"] == "forbidden" and "'approve'" in r.json()["message"]
        assert c.get(f"/v1/executions/{eid}").json()["status"] == "pending_approval"
    with server.client() as c:  # a key made as before may
        assert (
            c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"approve": True}}}).status_code == 202
        )
        assert _wait_settled(c, eid)["status"] == "succeeded"


def test_a_waiting_execution_can_be_cancelled(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        eid = _start_waiting(c)["execution_id"]
        r = c.post(f"/v1/executions/{eid}/cancel")
        assert r.status_code == 202 and r.json()["status"] == "cancelled", r.text
        assert c.get(f"/v1/executions/{eid}").json()["status"] == "cancelled"
        late = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"approve": True}}})
        assert late.status_code == 409, late.text
        assert _ledger(gates) == []


def test_a_rule_that_marks_nothing_is_refused(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        r = c.post(f"/v1/plans/{plan_id}/executions", json={"approval": {}})
        assert r.status_code == 400 and r.json()["code"] == "invalid_approval", r.text
        assert c.get("/v1/executions").json()["items"] == []


def _wait_settled(c: httpx.Client, eid: str) -> dict[str, Any]:
    """The execution once it has finished (the stream ends at its end)."""
    for _ in _events(c, eid):
        pass
    body: dict[str, Any] = c.get(f"/v1/executions/{eid}").json()
    return body


def _events(c: httpx.Client, eid: str) -> list[dict[str, Any]]:
    import json

    out: list[dict[str, Any]] = []
    with c.stream("GET", f"/v1/executions/{eid}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                out.append(json.loads(line[5:]))
                if out[-1]["type"] == "plan_finished":
                    break
    return out


def test_graphql_starts_with_a_rule_and_answers(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        start = (
            "mutation($p: String!, $a: JSON) { executePlan(planId: $p, wait: 20, approval: $a) { executionId status } }"
        )
        r = c.post("/graphql", json={"query": start, "variables": {"p": plan_id, "a": RULE}}).json()
        started = r["data"]["executePlan"]
        assert started["status"] == "pending_approval", r
        eid = started["executionId"]
        answer = "mutation($e: String!, $a: JSON!) { approveExecution(executionId: $e, answers: $a) { status } }"
        bad = c.post("/graphql", json={"query": answer, "variables": {"e": eid, "a": {"pay": {"approve": "x"}}}}).json()
        assert bad["errors"][0]["extensions"]["code"] == "invalid_approval", bad
        shown = c.post("/graphql", json={"query": f'{{ execution(executionId: "{eid}") {{ approval }} }}'}).json()
        assert shown["data"]["execution"]["approval"]["steps"][0]["step_id"] == "pay", shown
        ok = c.post("/graphql", json={"query": answer, "variables": {"e": eid, "a": {"pay": {"approve": True}}}}).json()
        assert ok["data"]["approveExecution"]["status"] == "queued", ok
        assert _wait_settled(c, eid)["status"] == "succeeded"
        assert _ledger(gates) == ["3"]


def test_the_client_starts_with_a_rule_and_approves(server: ThreadServer, gates: Path) -> None:
    from toolplan import ServiceError
    from toolplan.client import Client
    from toolplan.execute import Approval, ApprovalRule

    with server.client() as raw, Client(server.url, api_key=server.key) as client:
        plan_id = raw.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        waiting = client.execute(plan_id, wait=20, approval=ApprovalRule(tools=frozenset({"charge"})))
        assert waiting.status == "pending_approval" and waiting.approval is not None
        assert waiting.approval.step_ids == ("pay",)
        try:
            client.approve(waiting.execution_id, {"nope": Approval()})
            raise AssertionError("an answer for a step that does not wait was taken")
        except ServiceError as exc:
            assert exc.code == "invalid_approval"
        assert client.approve(waiting.execution_id, {"pay": Approval.reject("not today")}) == "queued"
        done = _wait_settled(raw, waiting.execution_id)
        assert done["status"] == "failed" and _ledger(gates) == []


def test_an_unanswered_approval_expires_on_time_and_the_run_goes_on(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        rule = {**RULE, "timeout": 1.5}
        r = c.post(f"/v1/plans/{plan_id}/executions?wait=20", json={"approval": rule})
        waiting = r.json()
        assert waiting["status"] == "pending_approval", waiting
        (pending,) = waiting["approval"]["steps"]
        assert pending["expires_at"] is not None
        # Nobody answers and nobody reads the execution: the service's timer ends the wait. The event
        # stream (which ends with the run) shows it.
        events = _events(c, waiting["execution_id"])
        types = [e["type"] for e in events]
        assert "approval_expired" in types and types[-1] == "plan_finished", types
        expired = next(e for e in events if e["type"] == "approval_expired")
        assert expired["payload"]["steps"] == ["pay"], expired
        done = c.get(f"/v1/executions/{waiting['execution_id']}").json()
        steps = {s["id"]: s for s in done["steps"]}
        assert steps["pay"]["status"] == "rejected" and "approval timed out" in steps["pay"]["error"]["message"]
        assert steps["after"]["status"] == "skipped" and steps["a"]["status"] == "succeeded"
        assert _ledger(gates) == []


AHEAD: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "pay", "tool": "charge", "arguments": {"amount": "$ref:a"}},
        {"id": "tip", "tool": "charge", "arguments": {"amount": 1}, "depends_on": ["pay"]},
    ]
}


def test_the_whole_plan_is_approved_at_once_steps_not_ready_included(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": AHEAD}).json()["plan_id"]
        waiting = c.post(f"/v1/plans/{plan_id}/executions?wait=20", json={"approval": RULE}).json()
        assert waiting["status"] == "pending_approval", waiting
        steps = waiting["approval"]["steps"]
        assert [(p["step_id"], p["ready"]) for p in steps] == [("pay", True), ("tip", False)]
        eid = waiting["execution_id"]
        answers = {"pay": {"approve": True}, "tip": {"approve": True, "arguments": {"amount": 2}}}
        r = c.post(f"/v1/executions/{eid}/approvals", json={"answers": answers})
        assert r.status_code == 202, r.text
        done = _wait_settled(c, eid)
        assert done["status"] == "succeeded", done
        assert _ledger(gates) == ["3", "2"]  # the later step ran with its edit, without waiting again


TWO: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "pay", "tool": "charge", "arguments": {"amount": "$ref:a"}},
        {"id": "fee", "tool": "charge", "arguments": {"amount": 1}},
    ]
}


def test_a_step_left_waiting_keeps_its_deadline_when_another_is_answered(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = c.post("/v1/plans", json={"plan": TWO}).json()["plan_id"]
        waiting = c.post(f"/v1/plans/{plan_id}/executions?wait=20", json={"approval": {**RULE, "timeout": 3}}).json()
        assert waiting["status"] == "pending_approval", waiting
        eid = waiting["execution_id"]
        deadline = {p["step_id"]: p["expires_at"] for p in waiting["approval"]["steps"]}
        assert set(deadline) == {"pay", "fee"}
        r = c.post(f"/v1/executions/{eid}/approvals", json={"answers": {"pay": {"approve": True}}})
        assert r.status_code == 202, r.text
        events = _events(c, eid)  # to the end: fee's deadline passes, and the run ends
        asked = [e["payload"] for e in events if e["type"] == "approval_requested"]
        assert [p["expires_at"] for p in asked[-1]["steps"]] == [deadline["fee"]]  # not a new deadline
        expired = [e["payload"]["steps"] for e in events if e["type"] == "approval_expired"]
        assert expired == [["fee"]], events
        done = c.get(f"/v1/executions/{eid}").json()
        steps = {s["id"]: s["status"] for s in done["steps"]}
        assert steps == {"a": "succeeded", "pay": "succeeded", "fee": "rejected"}
        assert _ledger(gates) == ["3"]
