"""The REST API against a real uvicorn server on 127.0.0.1 and a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from svc_support import ThreadServer

CHAIN = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
    ],
    "output_steps": ["b"],
}
GATED = {
    "steps": [
        {"id": "first", "tool": "charge", "arguments": {"amount": 5}},
        {"id": "wait", "tool": "gate", "arguments": {"name": "open"}, "depends_on": ["first"]},
        {"id": "last", "tool": "add", "arguments": {"a": 1, "b": 1}, "depends_on": ["wait"]},
    ]
}


def post_plan(c: httpx.Client, plan: dict[str, Any]) -> str:
    r = c.post("/v1/plans", json={"plan": plan})
    assert r.status_code == 201, r.text
    return str(r.json()["plan_id"])


def events(c: httpx.Client, execution_id: str, last: int | None = None) -> list[dict[str, Any]]:
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    out: list[dict[str, Any]] = []
    with c.stream("GET", f"/v1/executions/{execution_id}/events", headers=headers) as r:
        assert r.status_code == 200
        event_id = None
        for line in r.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                out.append(json.loads(line[5:].strip()) | {"event_id": event_id})
    return out


def test_a_plan_is_posted_executed_and_read_by_id(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = post_plan(c, CHAIN)
        assert plan_id.startswith("plan_")
        r = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["execution_id"].startswith("exec_") and body["status"] == "succeeded"
        assert body["outputs"] == {"b": 13} and [s["output"] for s in body["steps"]] == [3, 13]
        assert c.get(f"/v1/executions/{body['execution_id']}").json() == body
        assert c.get(f"/v1/plans/{plan_id}").json()["plan"] == CHAIN
        listed = c.get("/v1/executions", params={"plan_id": plan_id}).json()["items"]
        assert [e["execution_id"] for e in listed] == [body["execution_id"]]


# A step of an execution as the API shows it: these keys, in this order (no ``arguments``); keys are
# only ever added at the end.
STEP_KEYS = [
    "id",
    "tool",
    "status",
    "output",
    "error",
    "attempts",
    "started_at",
    "ended_at",
    "used_fallback",
    "warnings",
    "reused",
    "fallback_link",  # added last: which link of a fallback chain stood (0: none)
    "shared_with",
    "cached",
]


def test_the_steps_of_an_execution_keep_their_wire_format(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = post_plan(c, CHAIN)
        body = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30}).json()
        assert list(body) == [
            "execution_id",
            "plan_id",
            "status",
            "created_at",
            "updated_at",
            "calls",
            "cancel_requested",
            "steps",
            "outputs",
            "refused",
            "approval",  # added last: what a pending_approval execution waits for (else null)
        ]
        steps = body["steps"]
        assert [list(s) for s in steps] == [STEP_KEYS, STEP_KEYS]
        assert all(isinstance(s["started_at"], float) and s["ended_at"] >= s["started_at"] for s in steps)
        common = {"tool": "add", "status": "succeeded", "error": None, "attempts": 1}
        flags = {
            "used_fallback": False,
            "warnings": [],
            "reused": False,
            "fallback_link": 0,
            "shared_with": [],
            "cached": False,
        }
        assert [{k: v for k, v in s.items() if not k.endswith("_at")} for s in steps] == [
            {"id": "a", **common, "output": 3, **flags},
            {"id": "b", **common, "output": 13, **flags},
        ]


def test_without_wait_the_answer_is_202_and_the_execution_runs_on(server: ThreadServer, gates: Path) -> None:
    with server.client() as c:
        plan_id = post_plan(c, GATED)
        r = c.post(f"/v1/plans/{plan_id}/executions")
        assert r.status_code == 202 and r.json()["status"] == "queued"
        execution_id = r.json()["execution_id"]
        (gates / "open").touch()
        r = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30})
        assert r.json()["status"] == "succeeded"
        seen = events(c, execution_id)
        assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1)) == [e["event_id"] for e in seen]
        assert seen[-1]["type"] == "plan_finished" and seen[-1]["payload"] == {"status": "succeeded"}
        later = events(c, execution_id, last=3)
        assert later == seen[3:]


def test_an_invalid_plan_is_422_with_every_issue_and_nothing_is_stored(server: ThreadServer) -> None:
    bad = {"steps": [{"id": "a", "tool": "nope", "arguments": {}}, {"id": "b", "tool": "add", "arguments": {}}]}
    with server.client() as c:
        r = c.post("/v1/plans", json={"plan": bad})
        assert r.status_code == 422
        body = r.json()
        assert body["code"] == "invalid_plan" and len(body["details"]) >= 2
        assert c.get("/v1/plans").json()["items"] == []


def test_every_route_needs_a_key(server: ThreadServer) -> None:
    routes = [
        ("GET", "/v1/requests"),
        ("POST", "/v1/requests"),
        ("GET", "/v1/requests/req_1"),
        ("POST", "/v1/requests/req_1/executions"),
        ("GET", "/v1/plans"),
        ("POST", "/v1/plans"),
        ("GET", "/v1/plans/plan_1"),
        ("POST", "/v1/plans/plan_1/executions"),
        ("GET", "/v1/executions"),
        ("GET", "/v1/executions/exec_1"),
        ("POST", "/v1/executions/exec_1/cancel"),
        ("POST", "/v1/executions/exec_1/resume"),
        ("GET", "/v1/executions/exec_1/events"),
        ("GET", "/v1/executions/exec_1/graph"),
    ]
    for key in (None, "", "tpk_nothing_here", server.key + "x"):
        headers = {} if key is None else {"X-API-Key": key}
        with httpx.Client(base_url=server.url, headers=headers) as c:
            for method, path in routes:
                r = c.request(method, path, json={})
                assert r.status_code == 401, (method, path, r.text)
                assert r.json()["code"] == "unauthorized" and "X-API-Key" in r.json()["message"]
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/healthz").status_code == 200


def test_idempotency_key_gives_one_execution_and_the_same_answer(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = post_plan(c, CHAIN)
        key = {"Idempotency-Key": "k-1"}
        first = c.post(f"/v1/plans/{plan_id}/executions", headers=key)
        again = c.post(f"/v1/plans/{plan_id}/executions", headers=key)
        assert first.status_code == again.status_code == 202
        assert first.json() == again.json() and again.headers["Idempotent-Replayed"] == "true"
        assert len(c.get("/v1/executions").json()["items"]) == 1
        other = c.post(f"/v1/plans/{plan_id}/executions", headers=key, params={"wait": 1})
        assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
        p1 = c.post("/v1/plans", json={"plan": CHAIN}, headers={"Idempotency-Key": "p"})
        p2 = c.post("/v1/plans", json={"plan": CHAIN}, headers={"Idempotency-Key": "p"})
        assert p1.json()["plan_id"] == p2.json()["plan_id"]
        assert len(c.get("/v1/plans").json()["items"]) == 2  # the first plan, and this one once


def test_cancel_then_resume_runs_no_finished_step_again(server: ThreadServer, gates: Path, tmp_path: Path) -> None:
    with server.client() as c:
        plan_id = post_plan(c, GATED)
        execution_id = c.post(f"/v1/plans/{plan_id}/executions").json()["execution_id"]
        _until(c, execution_id, lambda e: e["type"] == "step_started" and e["step_id"] == "wait")
        r = c.post(f"/v1/executions/{execution_id}/cancel")
        assert r.status_code == 202 and r.json()["status"] in ("cancelling", "cancelled")
        stopped = events(c, execution_id)
        assert stopped[-1]["payload"] == {"status": "cancelled"}
        assert c.get(f"/v1/executions/{execution_id}").json()["status"] == "cancelled"
        (gates / "open").touch()
        assert c.post(f"/v1/executions/{execution_id}/resume").json()["status"] == "queued"
        rest = events(c, execution_id, last=stopped[-1]["seq"])
        assert rest[-1]["payload"] == {"status": "succeeded"}
        assert [e["type"] for e in rest[:2]] == ["run_queued", "run_resumed"]
        assert {e["step_id"] for e in rest if e["type"] == "step_started"} == {"wait", "last"}
        steps = {s["id"]: s for s in c.get(f"/v1/executions/{execution_id}").json()["steps"]}
        assert steps["last"]["output"] == 2
        # first ended before the cancel: the resume reused it; wait (cut off in its call) and last ran after it
        assert {sid: s["reused"] for sid, s in steps.items()} == {"first": True, "wait": False, "last": False}
        assert (tmp_path / "ledger.txt").read_text() == "5\n"  # charged once
        finished = c.post(f"/v1/executions/{execution_id}/resume")
        assert finished.status_code == 409 and finished.json()["code"] == "run_conflict"


def test_a_body_over_the_limit_is_413(db_url: str, gates: Path) -> None:
    from toolplan.service import ServiceConfig

    s = ThreadServer(db_url, config=ServiceConfig(max_body_bytes=2000, poll_interval=0.05)).start()
    try:
        with s.client() as c:
            r = c.post("/v1/plans", json={"plan": {"steps": [], "goal": "x" * 5000}})
            assert r.status_code == 413 and r.json()["code"] == "request_too_large"
            chunked = c.post("/v1/plans", content=iter([b"{" + b" " * 3000 + b"}"]))
            assert chunked.status_code == 413
    finally:
        s.stop()


def test_listings_page_with_a_cursor(server: ThreadServer) -> None:
    with server.client() as c:
        ids = [post_plan(c, CHAIN) for _ in range(5)]
        seen: list[str] = []
        cursor = None
        while True:
            page = c.get("/v1/plans", params={"limit": 2} | ({"cursor": cursor} if cursor else {})).json()
            seen += [p["plan_id"] for p in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == ids[::-1]
        bad = c.get("/v1/plans", params={"cursor": "garbage"})
        assert bad.status_code == 400 and "cursor" in bad.json()["message"]


def test_unknown_ids_are_404_with_a_code(server: ThreadServer) -> None:
    with server.client() as c:
        assert c.get("/v1/executions/exec_x").json()["code"] == "run_not_found"
        assert c.get("/v1/plans/plan_x").status_code == 404
        assert c.post("/v1/plans/plan_x/executions").status_code == 404
        assert c.get("/v1/requests/req_x").status_code == 404
        assert c.post("/v1/requests", json={"query": "hi"}).json()["code"] == "no_model"


def _until(c: httpx.Client, execution_id: str, stop: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    with c.stream("GET", f"/v1/executions/{execution_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                if stop(seen[-1]):
                    break
    return seen


def test_a_key_may_have_so_many_executions_at_once(db_url: str, gates: Path) -> None:
    from toolplan.service import ServiceConfig

    s = ThreadServer(db_url, config=ServiceConfig(max_active_per_key=2, poll_interval=0.05)).start()
    try:
        with s.client() as c:
            plan_id = post_plan(c, {"steps": [{"id": "w", "tool": "gate", "arguments": {"name": "go"}}]})
            for _ in range(2):
                assert c.post(f"/v1/plans/{plan_id}/executions").status_code == 202
            over = c.post(f"/v1/plans/{plan_id}/executions")
            assert over.status_code == 429 and over.json()["code"] == "too_many_executions"
            keyed = {"Idempotency-Key": "later"}
            assert c.post(f"/v1/plans/{plan_id}/executions", headers=keyed).status_code == 429
            again = c.post(f"/v1/plans/{plan_id}/executions", headers=keyed)  # not kept: tried again at once
            assert again.status_code == 429 and "Idempotent-Replayed" not in again.headers
            (gates / "go").touch()
            done = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30})
            while done.status_code == 429:  # the first two are finishing: the limit frees as they end
                done = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 30})
            assert done.status_code == 200 and done.json()["status"] == "succeeded"
    finally:
        s.stop()


def test_a_revoked_key_is_refused_from_its_next_request(db_url: str, gates: Path) -> None:
    import asyncio

    from toolplan.service._store import ServiceStore
    from toolplan.store import open_store

    s = ThreadServer(db_url).start()
    try:
        with s.client() as c:
            assert c.get("/v1/plans").status_code == 200

            async def revoke() -> None:
                async with open_store(db_url) as store:
                    data = ServiceStore(store)
                    (key,) = await data.list_keys()
                    await data.revoke_key(key.key_id)

            asyncio.run(revoke())
            assert c.get("/v1/plans").status_code == 401
    finally:
        s.stop()
