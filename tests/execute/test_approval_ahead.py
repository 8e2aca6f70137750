"""Approval of streamed plans, and of a plan's steps before they are ready ("approve the plan" once)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from approval_support import CALLS, PLAN, TOOLS

from toolplan import Approval, ApprovalRequest, ApprovalRule, PlanResult, tool
from toolplan.execute import execute_plan, execute_plan_stream


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


@tool
def move(src: str, dst: str) -> str:
    """Move a file."""
    CALLS.append(("move", (src, dst)))
    return f"moved {src} to {dst}"


WRITES = ApprovalRule(not_read_only=True)


async def test_the_request_lists_steps_not_ready_yet_with_arguments_as_far_as_resolved() -> None:
    plan = {
        "steps": [*PLAN["steps"], {"id": "m", "tool": "move", "arguments": {"src": "$ref:g.path", "dst": "$ref:d"}}]
    }
    waiting = await execute_plan(plan, [*TOOLS, move], approval=WRITES)
    assert waiting.status == "pending_approval" and waiting.approval is not None
    assert waiting.approval.step_ids == ("d", "n", "m")
    assert [p.step_id for p in waiting.approval.ready] == ["d"]
    n, m = waiting.approval.ahead
    assert n.arguments == {"message": "{{d}}"} and n.expires_at is None and not n.ready
    assert m.arguments == {"src": "/tmp/b.txt", "dst": "$ref:d"}  # g ran: its part is resolved
    assert waiting.steps["n"].status == "pending"  # not ready: it is not waiting for an answer itself
    assert ApprovalRequest.from_dict(json.loads(json.dumps(waiting.approval.to_dict()))) == waiting.approval

    # "Approve the plan": one answer for every step, ready or not; nothing waits again.
    done = await execute_plan(
        plan, [*TOOLS, move], approval=WRITES, resume=waiting, approvals=waiting.approval.approve_all()
    )
    assert done.ok, done.to_model_text()
    assert ("notify", "deleted /tmp/a.txt") in CALLS and ("move", ("/tmp/b.txt", "deleted /tmp/a.txt")) in CALLS


async def test_an_answer_ahead_of_time_is_kept_until_its_step_is_ready() -> None:
    waiting = await execute_plan(PLAN, TOOLS, approval=WRITES)
    assert waiting.approval is not None
    # Only the later step is answered: the first still waits, and the answer is kept in the request.
    still = await execute_plan(
        PLAN, TOOLS, approval=WRITES, resume=waiting, approvals={"n": Approval.reject("no messages today")}
    )
    assert still.status == "pending_approval" and still.approval is not None
    assert still.approval.step_ids == ("d",) and set(still.approval.answered) == {"n"}
    again = PlanResult.from_dict(json.loads(json.dumps(still.to_dict())))  # kept as JSON meanwhile
    done = await execute_plan(PLAN, TOOLS, approval=WRITES, resume=again, approvals={"d": Approval()})
    assert done.steps["d"].ok and done.steps["n"].status == "rejected"
    error = done.steps["n"].error
    assert error is not None and "no messages today" in error.message
    assert not any(c[0] == "notify" for c in CALLS)


async def test_the_callback_is_asked_once_for_the_whole_plan() -> None:
    asked: list[ApprovalRequest] = []

    async def approve_plan(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        return request.approve_all()

    result = await execute_plan(PLAN, TOOLS, approval=WRITES, on_approval=approve_plan)
    assert result.ok and ("notify", "deleted /tmp/a.txt") in CALLS
    assert len(asked) == 1
    assert [(p.step_id, p.ready) for p in asked[0].steps] == [("d", True), ("n", False)]


async def test_a_bad_edit_ahead_of_time_is_refused_and_the_step_is_asked_when_ready() -> None:
    asked: list[ApprovalRequest] = []

    async def answer(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        if len(asked) == 1:
            return {"d": Approval(), "n": Approval.approve({"message": 7})}
        return {"n": Approval.reject("asked again")}

    result = await execute_plan(PLAN, TOOLS, approval=WRITES, on_approval=answer)
    assert len(asked) == 2 and asked[1].step_ids == ("n",) and "n" in asked[1].problems
    assert result.steps["n"].status == "rejected" and result.steps["d"].ok
