"""The agent's side of streamed plans: one `StreamingPlan` per streamed ``execute_tool_plan`` call."""

from __future__ import annotations

import asyncio

from .._errors import PlanValidationError, ToolError
from ..execute import StreamingPlan
from ..models import ToolCall, ToolReturnMessage
from ._executors import TurnContext
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
            ctx.invoker,
            max_concurrency=tool.max_concurrency,
            max_steps=tool.max_steps,
            on_event=ctx.emit,
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
            arguments = call.parse_arguments()
        except ToolError as exc:  # not JSON: nothing can be validated
            self.plan.abort("Cancelled: the streamed plan is not valid JSON.")
            return self._error(call, exc.message)
        try:
            result = await self.plan.finish(arguments)
        except PlanValidationError as exc:
            return self._error(call, exc.message)
        self.ctx.plan_results.append(result)
        return ToolReturnMessage(
            tool_call_id=call.id, name=call.name, content=result.to_model_text(max_value_chars=self.ctx.max_value_chars)
        )

    def _error(self, call: ToolCall, message: str) -> ToolReturnMessage:
        started = len(self.plan.dispatched)
        note = f" {started} step(s) that had already started were cancelled." if started else ""
        return ToolReturnMessage(tool_call_id=call.id, name=call.name, content=f"Error: {message}{note}", is_error=True)
