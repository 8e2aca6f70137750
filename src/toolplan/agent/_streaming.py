"""The agent's side of streamed plans: one `StreamingPlan` per streamed ``execute_tool_plan`` call."""

from __future__ import annotations

import asyncio
from typing import Any

from .._errors import PlanValidationError, ToolError
from ..execute import PlanResult, StreamedPlanInvalid
from ..execute._internal import ApprovalGate, StreamingPlan, cap_text
from ..models import ToolCall, ToolReturnMessage
from ._executors import TurnContext, tool_content
from ._metatools import PlanTool

__all__ = ("StreamedPlan",)


class StreamedPlan:
    """A plan the model is streaming: its steps start as they arrive; `reply` answers the call."""

    def __init__(self, plan: StreamingPlan, ctx: TurnContext) -> None:
        self.plan = plan
        self.ctx = ctx

    @classmethod
    def start(cls, tool: PlanTool, ctx: TurnContext, tg: asyncio.TaskGroup) -> StreamedPlan:
        """Start an empty run in ``tg`` that shares the agent run's invoker."""
        plan = StreamingPlan(
            tool.registry,
            ctx.invoker.with_budget(tool.limits.budget),
            limits=tool.limits,
            expires=ctx.expires,
            expires_note="the agent run's deadline",
            on_event=ctx.emit,
            store=ctx.store,
            parent=ctx.run_id or None,
            approval=None if ctx.approval is None else ApprovalGate(ctx.approval, tool.registry, ctx.on_approval),
        )
        plan.start(tg)
        return cls(plan, ctx)

    def feed(self, delta: str) -> None:
        """The next piece of the call's arguments."""
        self.plan.feed(delta)

    def abort(self, reason: str) -> None:
        """Cancel what the plan started."""
        self.plan.abort(reason)

    async def reply(self, call: ToolCall) -> ToolReturnMessage:
        """Validate the complete plan, let it finish, and answer the model."""
        try:
            arguments: Any = call.parse_arguments()
        except ToolError:  # not a JSON object: `finish` validates the text that arrived and says why
            arguments = None
        try:
            result = await self.plan.finish(arguments)
        except StreamedPlanInvalid as exc:
            if exc.result is not None:
                self.ctx.plan_results.append(exc.result)  # what ran is kept, and the model is told
            return self._error(call, exc.message, exc.result)
        except PlanValidationError as exc:
            return self._error(call, exc.message)
        self.ctx.plan_results.append(result)
        if result.status == "pending_approval":  # the turn ends; the answers resume it (`Agent.run`)
            self.ctx.waiting[call.id] = (dict(arguments) if isinstance(arguments, dict) else {}, result)
        return ToolReturnMessage(
            tool_call_id=call.id, name=call.name, content=result.to_model_text(max_value_chars=self.ctx.max_value_chars)
        )

    def _error(self, call: ToolCall, message: str, ran: PlanResult | None = None) -> ToolReturnMessage:
        note = "" if ran is None else " " + self._what_ran(ran)
        return ToolReturnMessage(tool_call_id=call.id, name=call.name, content=f"Error: {message}{note}", is_error=True)

    def _what_ran(self, ran: PlanResult) -> str:
        """Which streamed steps had already run when the plan turned out invalid, and how each ended."""
        limit = self.ctx.max_value_chars
        lines = []
        for sid, r in ran.steps.items():
            if r.ok:
                lines.append(f"- {sid} ({r.tool}): succeeded, output {cap_text(tool_content(r.output), limit)}")
            elif r.status == "cancelled" and r.attempts:
                lines.append(f"- {sid} ({r.tool}): cancelled while running; it may have had effects")
            elif r.attempts:
                message = r.error.message if r.error else r.status
                lines.append(f"- {sid} ({r.tool}): {r.status}: {cap_text(message, limit)}")
        if not lines:
            return "No step of it had started: no tool was called. Fix the problems and send the whole plan again."
        return (
            "Some steps had already started while the plan was streaming; they are NOT undone:\n"
            + "\n".join(lines)
            + "\nDo not repeat the steps that succeeded: send a corrected plan with only the remaining steps, "
            "using the outputs above as literal values."
        )
