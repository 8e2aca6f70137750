"""Dry runs through the service (REST and GraphQL), against a real uvicorn server and a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from svc_support import ThreadServer

from toolplan import ServiceError, UserError
from toolplan.client import Client

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "pay", "tool": "charge", "arguments": {"amount": "$ref:a"}},
    ],
    "output_steps": ["pay"],
}


def _nothing_ran(c: Any, gates: Path) -> None:
    assert c.get("/v1/executions").json()["items"] == []
    assert not (gates.parent / "ledger.txt").exists()  # charge was never called


def test_rest_dry_runs_a_posted_plan_and_a_stored_one(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        r = c.post("/v1/plans/dry-run", json={"plan": PLAN})
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["dry_run"] is True and report["waves"] == [["a"], ["pay"]]
        pay = report["steps"][1]
        assert pay["tool"] == "charge" and pay["literal"] is False and pay["arguments"] == {"amount": "$ref:a"}
        assert report["budget"]["calls"] == 2 and report["budget"]["fits"] is True
        assert report["expected_seconds"] is None and "no latency" in report["duration_note"]
        assert c.get("/v1/plans").json()["items"] == []  # a dry run stores no plan

        plan_id = c.post("/v1/plans", json={"plan": json.dumps(PLAN)}).json()["plan_id"]
        stored = c.post(f"/v1/plans/{plan_id}/dry-run")
        assert stored.status_code == 200, stored.text
        assert stored.json()["plan_id"] == plan_id and stored.json()["critical_path"] == ["a", "pay"]
        _nothing_ran(c, gates)


def test_rest_an_invalid_plan_is_422_and_an_unknown_plan_404(server: ThreadServer, gates: Path) -> None:
    bad = {"steps": [{"id": "a", "tool": "nope", "arguments": {}}]}
    with server.client() as c:
        r = c.post("/v1/plans/dry-run", json={"plan": bad})
        assert r.status_code == 422 and r.json()["code"] == "invalid_plan"
        assert c.post("/v1/plans/plan_0000000000000_nothere0/dry-run").status_code == 404
        assert c.post("/v1/plans/dry-run", json={"plan": PLAN}, headers={"X-API-Key": "wrong"}).status_code == 401
        _nothing_ran(c, gates)


def test_graphql_dry_run_of_a_plan_or_a_stored_plan(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        r = c.post("/graphql", json={"query": "query($p: JSON) { dryRun(plan: $p) }", "variables": {"p": PLAN}})
        body = r.json()
        assert "errors" not in body, body
        assert body["data"]["dryRun"]["critical_path"] == ["a", "pay"]
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        by_id = c.post("/graphql", json={"query": f'{{ dryRun(planId: "{plan_id}") }}'}).json()
        assert by_id["data"]["dryRun"]["plan_id"] == plan_id
        neither = c.post("/graphql", json={"query": "{ dryRun }"}).json()
        assert neither["errors"][0]["extensions"]["code"] == "invalid_request"
        _nothing_ran(c, gates)


def test_the_client_dry_runs_a_plan_and_a_stored_one(server: ThreadServer, gates: Path) -> None:
    with Client(server.url, api_key=server.key) as client:
        report = client.dry_run(PLAN)
        assert report["waves"] == [["a"], ["pay"]] and report["destructive"] == []
        stored = client.create_plan(PLAN)
        assert client.dry_run(plan_id=stored.plan_id)["plan_id"] == stored.plan_id
        with pytest.raises(ServiceError) as caught:
            client.dry_run({"steps": [{"id": "a", "tool": "nope", "arguments": {}}]})
        assert caught.value.code == "invalid_plan"
        with pytest.raises(UserError, match="exactly one"):
            client.dry_run(PLAN, plan_id=stored.plan_id)
    with server.client() as c:
        _nothing_ran(c, gates)
