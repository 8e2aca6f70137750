"""The service's live page at ``/ui/executions/{id}`` and the graph route it reads."""

from __future__ import annotations

import httpx
from ui_support import PLAN, ServiceThread


def test_the_page_needs_no_key_and_its_data_does(service: ServiceThread) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as anonymous:
        page = anonymous.get("/ui/executions/exec_whatever")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        script = anonymous.get("/ui/static/live.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert "X-API-Key" in script.text
        missing = anonymous.get("/ui/static/nothing.js")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
        r = anonymous.get("/v1/executions/exec_whatever/graph")
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
        paths = anonymous.get("/openapi.json").json()["paths"]
        assert "/v1/executions/{execution_id}/graph" in paths
        assert not [p for p in paths if p.startswith("/ui")]  # the page is not part of the API


def test_the_graph_route_gives_the_executions_plan(service: ServiceThread) -> None:
    with httpx.Client(base_url=service.url, headers={"X-API-Key": service.key}, timeout=30) as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        execution_id = c.post(f"/v1/plans/{plan_id}/executions").json()["execution_id"]
        graph = c.get(f"/v1/executions/{execution_id}/graph").json()
        assert graph["execution_id"] == execution_id
        deps = {s["id"]: sorted(s["deps"]) for s in graph["steps"]}
        assert deps == {
            "search_web": [],
            "search_docs": [],
            "fetch_prices": [],
            "summarise": ["search_docs", "search_web"],
            "compare": ["fetch_prices", "summarise"],
            "report": ["summarise"],
        }
        assert graph["output_steps"] == [s["id"] for s in PLAN["steps"]]
        r = c.get("/v1/executions/exec_nothing/graph")
        assert r.status_code == 404 and "exec_nothing" in r.json()["message"]
