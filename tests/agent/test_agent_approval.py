"""Agent(approval=...): a plan that needs a person's answer ends the model's turn; the answers continue it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from toolplan import Agent, Approval, ApprovalError, ApprovalRequest, ApprovalRule, UserError, tool
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import ScriptedModel

CALLS: list[str] = []


@tool(read_only=True)
def lookup(name: str) -> str:
    """Find an account."""
    CALLS.append(f"lookup {name}")
    return f"acct-{name}"


@tool(destructive=True)
def close_account(account: str) -> str:
    """Close an account."""
    CALLS.append(f"close {account}")
    return f"closed {account}"


PLAN = {
    "steps": [
        {"id": "a", "tool": "lookup", "arguments": {"name": "bob"}},
        {"id": "c", "tool": "close_account", "arguments": {"account": "$ref:a"}, "rationale": "asked by bob"},
    ]
}


def plan_call() -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id="p1", name="execute_tool_plan", arguments=json.dumps(PLAN)),))


def tool_replies(messages: Any) -> list[ToolReturnMessage]:
    return [m for m in messages if isinstance(m, ToolReturnMessage)]


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


async def test_the_turn_ends_waiting_and_approvals_continue_it() -> None:
    model = ScriptedModel([plan_call(), "Bob's account is closed."])
    agent = Agent(
        model=model, tools=[lookup, close_account], tool_planning=True, approval=ApprovalRule(destructive=True)
    )
    waiting = await agent.run("close bob's account")
    assert waiting.status == "pending_approval"
    assert waiting.approval is not None and waiting.approval.step_ids == ("c",)
    assert waiting.approval.steps[0].arguments == {"account": "acct-bob"}
    assert waiting.approval.steps[0].rationale == "asked by bob"
    assert CALLS == ["lookup bob"]
    assert len(model.requests) == 1  # the model has not been asked again
    assert tool_replies(waiting.messages) == []

    done = await agent.run(resume=waiting, approvals={"c": Approval()})
    assert done.status == "completed" and done.output == "Bob's account is closed."
    assert CALLS == ["lookup bob", "close acct-bob"]  # the lookup did not run again
    (reply,) = tool_replies(done.messages)
    assert reply.tool_call_id == "p1" and "closed acct-bob" in reply.content
    model.assert_consumed()
    assert [r.status for r in done.plan_results] == ["succeeded"]


async def test_a_rejection_reaches_the_model_with_its_reason() -> None:
    model = ScriptedModel([plan_call(), "I did not close it."])
    agent = Agent(
        model=model, tools=[lookup, close_account], tool_planning=True, approval=ApprovalRule(destructive=True)
    )
    waiting = await agent.run("close bob's account")
    done = await agent.run(resume=waiting, approvals={"c": Approval.reject("bob has a pending refund")})
    assert done.output == "I did not close it."
    (reply,) = tool_replies(done.messages)
    assert "rejected" in reply.content and "bob has a pending refund" in reply.content
    assert "bob has a pending refund" in str(model.requests[-1].messages[-1])
    assert CALLS == ["lookup bob"]


async def test_with_a_callback_the_turn_does_not_end() -> None:
    async def yes(request: ApprovalRequest) -> Mapping[str, Approval]:
        return request.approve_all()

    model = ScriptedModel([plan_call(), "done"])
    agent = Agent(
        model=model,
        tools=[lookup, close_account],
        tool_planning=True,
        approval=ApprovalRule(destructive=True),
        on_approval=yes,
    )
    result = await agent.run("close bob's account")
    assert result.status == "completed" and CALLS == ["lookup bob", "close acct-bob"]


async def test_bad_resumes_are_refused() -> None:
    model = ScriptedModel([plan_call(), "x"])
    agent = Agent(
        model=model, tools=[lookup, close_account], tool_planning=True, approval=ApprovalRule(destructive=True)
    )
    waiting = await agent.run("close bob's account")
    with pytest.raises(ApprovalError):
        await agent.run(resume=waiting, approvals={"zzz": Approval()})
    with pytest.raises(ApprovalError):
        await agent.run(resume=waiting, approvals={"c": Approval.approve({"account": 7})})
    with pytest.raises(UserError, match="prompt"):
        await agent.run()
    with pytest.raises(UserError, match="no prompt"):
        await agent.run("again", resume=waiting)
    assert CALLS == ["lookup bob"]
    still = await agent.run(resume=waiting, approvals={})  # nothing answered: it still waits
    assert still.status == "pending_approval" and still.approval is not None
    assert still.approval.step_ids == ("c",)


async def test_direct_calls_are_asked_too_or_told_to_use_a_plan() -> None:
    direct = AssistantMessage(tool_calls=(ToolCall(id="d1", name="close_account", arguments='{"account": "x"}'),))
    rule = ApprovalRule(destructive=True)
    model = ScriptedModel([direct, "ok"])
    result = await Agent(model=model, tools=[lookup, close_account], approval=rule).run("close x")
    (reply,) = tool_replies(result.messages)
    assert reply.is_error and "needs a person's approval" in reply.content and "execute_tool_plan" in reply.content
    assert CALLS == []

    asked: list[ApprovalRequest] = []

    async def yes(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        return request.approve_all()

    model = ScriptedModel([direct, "ok"])
    result = await Agent(model=model, tools=[lookup, close_account], approval=rule, on_approval=yes).run("close x")
    assert CALLS == ["close x"] and asked[0].steps[0].tool == "close_account"


async def test_a_streamed_plan_waits_and_the_answers_continue_it() -> None:
    model = ScriptedModel([plan_call(), "Bob's account is closed."], chunk_size=3)
    agent = Agent(
        model=model,
        tools=[lookup, close_account],
        tool_planning=True,
        stream_plans=True,
        approval=ApprovalRule(destructive=True),
    )
    waiting = await agent.run("close bob's account")
    assert waiting.status == "pending_approval" and CALLS == ["lookup bob"]
    assert waiting.approval is not None and waiting.approval.step_ids == ("c",)
    assert waiting.approval.steps[0].arguments == {"account": "acct-bob"}
    done = await agent.run(resume=waiting, approvals={"c": Approval()})
    assert done.status == "completed" and CALLS == ["lookup bob", "close acct-bob"]
    (reply,) = tool_replies(done.messages)
    assert reply.tool_call_id == "p1" and "closed acct-bob" in reply.content


async def test_a_streamed_plan_asks_the_callback_while_it_streams() -> None:
    asked: list[ApprovalRequest] = []

    async def no(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        return request.reject_all("not bob")

    model = ScriptedModel([plan_call(), "not closed"], chunk_size=3)
    agent = Agent(
        model=model,
        tools=[lookup, close_account],
        tool_planning=True,
        stream_plans=True,
        approval=ApprovalRule(destructive=True),
        on_approval=no,
    )
    result = await agent.run("close bob's account")
    assert result.status == "completed" and CALLS == ["lookup bob"]
    assert [p.step_id for r in asked for p in r.steps] == ["c"]
    (reply,) = tool_replies(result.messages)
    assert "rejected: not bob" in reply.content


CODE = """
found = call_tool("lookup", {"name": "bob"})
try:
    out = call_tool("close_account", {"account": found})
except Exception as exc:
    out = "refused: " + str(exc)
set_result(out)
"""


def code_call() -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id="x1", name="execute_code", arguments=json.dumps({"code": CODE})),))


async def test_a_call_from_code_waits_for_the_callback() -> None:
    from toolplan.sandbox import SubprocessRunner

    asked: list[ApprovalRequest] = []

    async def edit(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        return {p.step_id: Approval.approve({"account": "acct-alice"}) for p in request.steps}

    model = ScriptedModel([code_call(), "done"])
    agent = Agent(
        model=model,
        tools=[lookup, close_account],
        code_execution=SubprocessRunner(),
        approval=ApprovalRule(destructive=True),
        on_approval=edit,
    )
    result = await agent.run("close bob's account")
    assert CALLS == ["lookup bob", "close acct-alice"]
    assert [(p.tool, dict(p.arguments)) for r in asked for p in r.steps] == [("close_account", {"account": "acct-bob"})]
    (reply,) = tool_replies(result.messages)
    assert "closed acct-alice" in reply.content


async def test_a_call_from_code_without_a_callback_fails_in_the_code_which_goes_on() -> None:
    from toolplan.sandbox import SubprocessRunner

    model = ScriptedModel([code_call(), "I need a plan for that."])
    agent = Agent(
        model=model,
        tools=[lookup, close_account],
        code_execution=SubprocessRunner(),
        approval=ApprovalRule(destructive=True),
    )
    result = await agent.run("close bob's account")
    assert result.status == "completed" and CALLS == ["lookup bob"]
    (reply,) = tool_replies(result.messages)
    assert "refused:" in reply.content and "execute_tool_plan" in reply.content
    (code_plan,) = result.plan_results
    assert code_plan.steps["call_2"].status == "rejected"
