"""An agent run whose plan waits for a person's answer: the turn ends, and the answers continue it.

With ``Agent(approval=rule)`` and no ``on_approval``, a plan (``execute_tool_plan``,
``execute_plan``) whose steps need approval returns waiting; the model's turn then ends with the
request in the run's result (status ``pending_approval``). ``agent.run(resume=result,
approvals=...)`` resumes those plans with the answers (nothing that ran runs again), gives the model
their results, rejections and reasons included, and the loop goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ApprovalError
from ..execute import Approval, ApprovalRequest, PendingStep
from ..models import AssistantMessage, ToolReturnMessage
from ._executors import _error_message
from ._metatools import _MetaTool
from ._result import AgentResult, WaitingTurn
from ._run_state import RunState

__all__ = ("Resume", "resume_turn", "waiting_result")

#: A run to go on with: the result that waits, and the answers by step id.
Resume = tuple[AgentResult[Any], Mapping[str, Approval]]


def waiting_result(
    run: RunState, result: AgentResult[Any], replies: Sequence[ToolReturnMessage | None]
) -> AgentResult[Any]:
    """``result`` (status ``pending_approval``) with the request of every waiting plan and the turn to go on with."""
    steps: list[PendingStep] = []
    problems: dict[str, str] = {}
    for _, plan in run.ctx.waiting.values():
        if plan.approval is not None:
            steps.extend(plan.approval.steps)
            problems.update(plan.approval.problems)
    request = ApprovalRequest(run_id=run.ctx.run_id, steps=tuple(steps), problems=problems)
    turn = WaitingTurn(replies=tuple(replies), plans=dict(run.ctx.waiting))
    return dataclasses.replace(result, approval=request, waiting=turn)


async def resume_turn(
    run: RunState, previous: AgentResult[Any], answers: Mapping[str, Approval]
) -> list[ToolReturnMessage | None]:
    """Resume the waiting plans of ``previous`` with ``answers``; the replies to its last turn's calls.

    A plan that still waits (a step left unanswered) is in ``run.ctx.waiting`` again, its reply None.

    Raises:
        ApprovalError: an answer names a step that does not wait, or its edit does not fit the tool.
    """
    turn = previous.waiting
    assert turn is not None
    ctx = run.ctx
    waiting_ids = {sid for _, plan in turn.plans.values() if plan.approval for sid in plan.approval.step_ids}
    unknown = {str(sid): f"step {sid!r} does not wait for approval" for sid in answers if sid not in waiting_ids}
    if unknown:
        raise ApprovalError(unknown)
    run.usage = previous.usage
    run.calls = previous.tool_calls
    waited = {id(plan) for _, plan in turn.plans.values()}
    ctx.plan_results.extend(r for r in previous.plan_results if id(r) not in waited)
    ctx.call_results.extend(previous.call_results)
    last = previous.messages[-1]
    assert isinstance(last, AssistantMessage)
    replies = list(turn.replies)
    for i, call in enumerate(last.tool_calls):
        if call.id not in turn.plans:
            continue
        args, plan = turn.plans[call.id]
        meta = ctx.meta_tools[call.name]
        assert isinstance(meta, _MetaTool)
        mine = {sid: a for sid, a in answers.items() if plan.approval is not None and sid in plan.approval.step_ids}
        content, is_error, result = await ctx.call_meta(
            meta, args, approval=ctx.approval, on_approval=ctx.on_approval, resume=plan, approvals=mine
        )
        if result is not None:
            ctx.plan_results.append(result)
            if result.status == "pending_approval":
                ctx.waiting[call.id] = (dict(args), result)
                continue
        replies[i] = (
            _error_message(call, content)
            if is_error
            else ToolReturnMessage(tool_call_id=call.id, name=call.name, content=content)
        )
    return replies
