"""Approval of streamed plans, and of a plan's steps before they are ready ("approve the plan" once)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from toolplan import Approval, ApprovalRequest, ApprovalRule, tool
from toolplan.execute import execute_plan, execute_plan_stream

CALLS: list[tuple[str, Any]] = []


@tool(read_only=True)
def find(name: str) -> dict[str, Any]:
    """Look a file up."""
    CALLS.append(("find", name))
    return {"path": f"/tmp/{name}", "size": len(name)}


@tool(destructive=True)
def delete(path: str) -> str:
    """Delete a file."""
    CALLS.append(("delete", path))
    return f"deleted {path}"


@tool
def notify(message: str) -> str:
    """Send a message."""
    CALLS.append(("notify", message))
    return "sent"


TOOLS = [find, delete, notify]

PLAN = {
    "steps": [
        {"id": "f", "tool": "find", "arguments": {"name": "a.txt"}},
        {"id": "d", "tool": "delete", "arguments": {"path": "$ref:f.path"}, "rationale": "free space"},
        {"id": "n", "tool": "notify", "arguments": {"message": "{{d}}"}},
        {"id": "g", "tool": "find", "arguments": {"name": "b.txt"}},
    ]
}


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


async def pieces(plan: Mapping[str, Any], size: int = 5) -> AsyncIterator[str]:
    text = json.dumps(plan)
    for i in range(0, len(text), size):
        yield text[i : i + size]


async def test_a_streamed_plan_waits_for_approval_and_resumes() -> None:
    rule = ApprovalRule(destructive=True)
    waiting = await execute_plan_stream(pieces(PLAN), TOOLS, approval=rule)
    assert waiting.status == "pending_approval" and waiting.approval is not None
    assert waiting.approval.step_ids == ("d",)
    (pending,) = waiting.approval.steps
    assert pending.arguments == {"path": "/tmp/a.txt"} and pending.dependents == ("n",)
    assert waiting.steps["n"].status == "pending" and ("find", "b.txt") in CALLS
    done = await execute_plan(PLAN, TOOLS, approval=rule, resume=waiting, approvals={"d": Approval()})
    assert done.ok and CALLS.count(("find", "a.txt")) == 1 and ("delete", "/tmp/a.txt") in CALLS


async def test_a_streamed_plan_asks_the_callback() -> None:
    async def no(request: ApprovalRequest) -> Mapping[str, Approval]:
        return request.reject_all("keep it")

    result = await execute_plan_stream(pieces(PLAN), TOOLS, approval=ApprovalRule(destructive=True), on_approval=no)
    assert result.steps["d"].status == "rejected" and result.steps["n"].status == "skipped"
    assert result.steps["g"].ok and not any(c[0] == "delete" for c in CALLS)
