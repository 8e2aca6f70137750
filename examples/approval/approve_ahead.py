"""Approve a whole plan once, before its steps are ready; approval in streamed plans and in code.

Run: python examples/approval/approve_ahead.py (no model, no network: a scripted model plays the agent).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

from toolplan import Agent, Approval, ApprovalRequest, ApprovalRule, execute_plan, tool
from toolplan.models import AssistantMessage, ToolCall
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import ScriptedModel

CALLS: list[str] = []


@tool(read_only=True)
def find_invoice(customer: str) -> dict[str, object]:
    """Find a customer's open invoice."""
    CALLS.append("find_invoice")
    return {"id": f"inv-{customer}", "amount": 120}


@tool
def charge(invoice: str, amount: int) -> str:
    """Charge an invoice."""
    CALLS.append(f"charge {invoice} {amount}")
    return f"charged {amount} for {invoice}"


@tool
def send_receipt(to: str, text: str) -> str:
    """Email a receipt."""
    CALLS.append(f"send_receipt {to}")
    return "sent"


PLAN = {
    "steps": [
        {"id": "inv", "tool": "find_invoice", "arguments": {"customer": "bob"}},
        {"id": "pay", "tool": "charge", "arguments": {"invoice": "$ref:inv.id", "amount": "$ref:inv.amount"}},
        {"id": "mail", "tool": "send_receipt", "arguments": {"to": "bob@example.com", "text": "{{pay}}"}},
    ]
}
TOOLS = [find_invoice, charge, send_receipt]
RULE = ApprovalRule(not_read_only=True)  # every side effect


async def whole_plan() -> None:
    # 1. The run waits; its request lists "pay" (ready) and "mail" (not ready: it needs pay's output).
    waiting = await execute_plan(PLAN, TOOLS, approval=RULE)
    assert waiting.approval is not None
    for p in waiting.approval.steps:
        print(f"1. {p.step_id} ready={p.ready} arguments={dict(p.arguments)}")
    # One answer for the whole plan: nothing waits again.
    done = await execute_plan(PLAN, TOOLS, approval=RULE, resume=waiting, approvals=waiting.approval.approve_all())
    print(f"2. {done.status}: {CALLS}")


async def asked_once() -> None:
    asked: list[ApprovalRequest] = []

    async def person(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.append(request)
        return {"pay": Approval(), "mail": Approval.reject("bob asked for no emails")}

    result = await execute_plan(PLAN, TOOLS, approval=RULE, on_approval=person)
    print(f"3. asked {len(asked)} time(s) about {list(asked[0].step_ids)}; mail {result.steps['mail'].status}")


async def streamed_and_code() -> None:
    call = ToolCall(id="p1", name="execute_tool_plan", arguments=json.dumps(PLAN))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Bob is charged."], chunk_size=8)
    agent = Agent(
        model, tools=TOOLS, tool_planning=True, stream_plans=True, approval=ApprovalRule(tools=frozenset({"charge"}))
    )
    waiting = await agent.run("charge bob")
    assert waiting.approval is not None
    print(f"4. streamed plan waits for {list(waiting.approval.step_ids)}")
    done = await agent.run(resume=waiting, approvals={"pay": Approval()})
    print(f"5. {done.status}: {done.output}")

    code = (
        'inv = call_tool("find_invoice", {"customer": "ann"})\n'
        'set_result(call_tool("charge", {"invoice": inv["id"], "amount": 5}))'
    )
    coded = ToolCall(id="c1", name="execute_code", arguments=json.dumps({"code": code}))

    async def yes(request: ApprovalRequest) -> Mapping[str, Approval]:
        print(f"6. code asks about {[(p.tool, dict(p.arguments)) for p in request.steps]}")
        return request.approve_all()

    model = ScriptedModel([AssistantMessage(tool_calls=(coded,)), "Ann is charged."])
    agent = Agent(model, tools=TOOLS, code_execution=SubprocessRunner(), approval=RULE, on_approval=yes)
    result = await agent.run("charge ann 5")
    print(f"7. {result.output} {CALLS[-1]}")


async def main() -> None:
    await whole_plan()
    CALLS.clear()
    await asked_once()
    CALLS.clear()
    await streamed_and_code()


if __name__ == "__main__":
    asyncio.run(main())
