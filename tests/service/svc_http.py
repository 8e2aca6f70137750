"""Small HTTP helpers of the service tests: post a plan, start an execution, read its event stream."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

Event = dict[str, Any]

# charge (a side effect that must happen once) → gate (waits for the test) → add
GATED: dict[str, Any] = {
    "steps": [
        {"id": "first", "tool": "charge", "arguments": {"amount": 5}},
        {"id": "wait", "tool": "gate", "arguments": {"name": "open"}, "depends_on": ["first"]},
        {"id": "last", "tool": "add", "arguments": {"a": 1, "b": 1}, "depends_on": ["wait"]},
    ],
    "output_steps": ["last"],
}


def gated(amount: int = 5, gate: str = "open") -> dict[str, Any]:
    """`GATED` charging ``amount`` and waiting for the gate ``gate``."""
    steps = [dict(s) for s in GATED["steps"]]
    steps[0]["arguments"] = {"amount": amount}
    steps[1]["arguments"] = {"name": gate}
    return {"steps": steps, "output_steps": ["last"]}


def post_plan(c: httpx.Client, plan: dict[str, Any]) -> str:
    r = c.post("/v1/plans", json={"plan": plan})
    assert r.status_code == 201, r.text
    return str(r.json()["plan_id"])


def start(c: httpx.Client, plan: dict[str, Any]) -> str:
    """Post ``plan`` and queue an execution of it; its id."""
    r = c.post(f"/v1/plans/{post_plan(c, plan)}/executions")
    assert r.status_code == 202, r.text
    return str(r.json()["execution_id"])


def read_events(
    c: httpx.Client, execution_id: str, *, last: int | None = None, until: Callable[[Event], bool] | None = None
) -> list[Event]:
    """The execution's events after ``last`` (sent as Last-Event-ID), to the stream's end or to the
    first for which ``until`` is true (the connection is then closed). Each has its SSE ``event_id``."""
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    out: list[Event] = []
    with c.stream("GET", f"/v1/executions/{execution_id}/events", headers=headers) as r:
        assert r.status_code == 200, r.read()
        for event in sse(r.iter_lines()):
            out.append(event)
            if until is not None and until(event):
                break
    return out


def sse(lines: Iterator[str]) -> Iterator[Event]:
    """The events of SSE ``lines`` (``response.iter_lines()``), each with its SSE ``event_id``."""
    event_id = None
    for line in lines:
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            yield json.loads(line[5:].strip()) | {"event_id": event_id}


def started(step_id: str) -> Callable[[Event], bool]:
    """``until=`` for `read_events`: the step ``step_id`` has started."""
    return lambda e: e["type"] == "step_started" and e["step_id"] == step_id


def ledger(path: Any) -> list[str]:
    """The charges made (one line each); none when the file does not exist."""
    try:
        return str(path.read_text()).split()
    except FileNotFoundError:
        return []
