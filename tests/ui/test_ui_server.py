"""`LiveServer` (the page of ``toolplan run --ui``): the service's routes and shapes, behind the run's key."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolplan._ui import LiveFeed, LiveServer
from toolplan.execute import PlanFinished, PlanResult, PlanStarted, StepFinished, StepResult, StepStarted
from toolplan.plan import validate_plan

PLAN = {
    "steps": [
        {"id": "a", "tool": "t", "arguments": {}},
        {"id": "b", "tool": "t", "arguments": {"x": "$ref:a"}},
    ]
}


@pytest.fixture
def live() -> Iterator[LiveServer]:
    compiled = validate_plan(PLAN).compiled
    assert compiled is not None
    with LiveServer(LiveFeed("run1", compiled)) as server:
        yield server


def client(server: LiveServer, key: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=server.origin, headers={"X-API-Key": server.key if key is None else key}, timeout=30)


def sse(c: httpx.Client, path: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    out = []
    with c.stream("GET", path, headers=headers or {}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        event_id = None
        for line in r.iter_lines():
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                out.append(json.loads(line[6:]) | {"event_id": event_id})
    return out


def play(feed: LiveFeed) -> None:
    now = time.time()
    feed(PlanStarted(run_id="run1", steps=("a", "b"), at=now))
    feed(StepStarted(run_id="run1", step_id="a", tool="t", attempt=1, at=now))
    a = StepResult(id="a", tool="t", status="succeeded", output={"n": 1}, attempts=1, started_at=now, ended_at=now + 1)
    feed(StepFinished(run_id="run1", result=a))
    feed(StepStarted(run_id="run1", step_id="b", tool="t", attempt=1, at=now + 1))
    b = StepResult(id="b", tool="t", status="succeeded", output=2, attempts=1, started_at=now + 1, ended_at=now + 2)
    feed(StepFinished(run_id="run1", result=b))
    result = PlanResult(
        status="succeeded", steps={"a": a, "b": b}, output_steps=("a", "b"), run_id="run1", started_at=now,
        ended_at=now + 2, deps={"a": (), "b": ("a",)},
    )  # fmt: skip
    feed(PlanFinished(run_id="run1", result=result))


def test_the_api_needs_the_run_key_and_the_page_does_not(live: LiveServer) -> None:
    assert live.url == f"{live.origin}/ui/executions/run1#key={live.key}"
    for key in ("", "wrong", live.key + "x"):
        with client(live, key) as c:
            for path in ("/v1/executions/run1", "/v1/executions/run1/graph", "/v1/executions/run1/events"):
                r = c.get(path)
                assert r.status_code == 401, path
                assert r.json()["code"] == "unauthorized" and "#key=" in r.json()["message"]
    with httpx.Client(base_url=live.origin) as c:
        page = c.get("/ui/executions/run1")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert 'src="../static/live.js"' in page.text and "cdn" not in page.text.lower()
        for name in ("live.js", "live.css", "dagre.min.js", "dagre.LICENSE"):
            assert c.get(f"/ui/static/{name}").status_code == 200, name
        for name in ("../_server.py", "index.html", "nope.js"):
            assert c.get(f"/ui/static/{name}").status_code == 404, name
        assert c.get("/", follow_redirects=False).headers["location"] == "/ui/executions/run1"
        assert c.get("/nowhere").json()["code"] == "not_found"


def test_routes_answer_in_the_service_shapes(live: LiveServer) -> None:
    with client(live) as c:
        graph = c.get("/v1/executions/run1/graph").json()
        assert graph == {
            "execution_id": "run1",
            "steps": [{"id": "a", "tool": "t", "deps": []}, {"id": "b", "tool": "t", "deps": ["a"]}],
            "output_steps": ["a", "b"],
        }
        before = c.get("/v1/executions/run1").json()
        assert before["status"] == "queued" and [s["status"] for s in before["steps"]] == ["pending", "pending"]
        r = c.get("/v1/executions/other")
        assert r.status_code == 404 and "run1" in r.json()["message"]
        play(live.feed)
        after = c.get("/v1/executions/run1").json()
        assert after["status"] == "succeeded" and after["outputs"] == {"a": {"n": 1}, "b": 2}
        assert [(s["id"], s["status"], s["output"]) for s in after["steps"]] == [
            ("a", "succeeded", {"n": 1}),
            ("b", "succeeded", 2),
        ]


def test_events_replay_from_the_start_or_after_last_event_id(live: LiveServer) -> None:
    play(live.feed)
    with client(live) as c:
        events = sse(c, "/v1/executions/run1/events")
        assert [e["type"] for e in events] == [
            "plan_started", "step_started", "step_finished", "step_started", "step_finished", "plan_finished",
        ]  # fmt: skip
        assert [e["seq"] for e in events] == [e["event_id"] for e in events] == [1, 2, 3, 4, 5, 6]
        assert events[2]["payload"] == {"status": "succeeded", "attempts": 1} and events[2]["step_id"] == "a"
        assert sse(c, "/v1/executions/run1/events", {"Last-Event-ID": "4"}) == events[4:]
        assert sse(c, "/v1/executions/run1/events?after=5") == events[5:]
        r = c.get("/v1/executions/run1/events", headers={"Last-Event-ID": "x"})
        assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_a_stream_follows_the_run_live_and_closing_ends_it() -> None:
    compiled = validate_plan(PLAN).compiled
    assert compiled is not None
    server = LiveServer(LiveFeed("run1", compiled))
    with server:
        got: list[dict[str, Any]] = []
        first = threading.Event()

        def read() -> None:
            with client(server) as c, c.stream("GET", "/v1/executions/run1/events") as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        got.append(json.loads(line[6:]))
                        first.set()

        reader = threading.Thread(target=read)
        reader.start()
        server.feed(PlanStarted(run_id="run1", steps=("a", "b"), at=time.time()))
        assert first.wait(30)
        assert [e["type"] for e in got] == ["plan_started"]
    reader.join(30)  # leaving the block ended the open stream (the run stopped without finishing)
    assert not reader.is_alive() and [e["type"] for e in got] == ["plan_started"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.origin}/healthz")
