"""One model turn of an agent run: ask the model (streamed plans start as their text arrives), run its calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..models import (
    Model,
    ModelMessage,
    ModelResponse,
    ModelSettings,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolReturnMessage,
)
from ..tools import ToolDefinition
from ._events import PlanStreamStarted
from ._executors import ToolCallExecutor, TurnContext
from ._metatools import PLAN_TOOL_NAME, PlanTool
from ._streaming import StreamedPlan

__all__ = ("ask", "run_calls")


async def ask(
    model: Model,
    settings: ModelSettings | None,
    messages: list[ModelMessage],
    definitions: list[ToolDefinition],
    ctx: TurnContext,
    tg: asyncio.TaskGroup,
    *,
    stream_plans: bool,
    tool_planning: bool,
) -> tuple[ModelResponse, dict[str, StreamedPlan]]:
    """Ask ``model`` for its next answer; with ``stream_plans``, start its plans' steps as their text arrives.

    Returns the response and the plans it streamed, by tool call id (``tg`` runs them).
    """
    streaming = ctx.emit is not None or (stream_plans and tool_planning)
    if not streaming:
        return await model.request(messages, definitions, settings), {}
    plans: dict[int, StreamedPlan] = {}
    response: ModelResponse | None = None
    plan_tool = ctx.meta_tools.get(PLAN_TOOL_NAME)
    stream = model.stream(messages, definitions, settings)
    try:
        async for event in stream:
            if isinstance(event, ResponseCompleted):
                response = event.response
            elif isinstance(event, TextDelta):
                if ctx.emit is not None:
                    ctx.emit(event)
            elif isinstance(event, ToolCallStarted):
                if stream_plans and event.name == PLAN_TOOL_NAME and isinstance(plan_tool, PlanTool):
                    if ctx.traced:
                        from ..tracing._internal import as_tool_call

                        with as_tool_call(PLAN_TOOL_NAME, event.id):
                            plans[event.index] = StreamedPlan.start(plan_tool, ctx, tg)
                    else:
                        plans[event.index] = StreamedPlan.start(plan_tool, ctx, tg)
                    if ctx.emit is not None:
                        ctx.emit(PlanStreamStarted(call_id=event.id))
            elif isinstance(event, ToolCallArgsDelta) and event.index in plans:
                plans[event.index].feed(event.delta)
    except BaseException:
        for plan in plans.values():  # the answer broke off: stop what its plans started
            plan.abort("Cancelled: the model's answer broke off.")
        raise
    finally:
        await stream.aclose()
    if response is None:
        from .._errors import UnexpectedModelBehavior

        raise UnexpectedModelBehavior(f"The stream of model {model.name!r} ended without a response.")
    by_id: dict[str, StreamedPlan] = {}
    calls = response.message.tool_calls
    for index, plan in plans.items():
        if index < len(calls) and calls[index].name == PLAN_TOOL_NAME:
            by_id[calls[index].id] = plan
        else:  # the final response does not contain the streamed call: stop what it started
            plan.abort("Cancelled: the model's final answer did not contain this plan.")
    return response, by_id


async def run_calls(
    executor: ToolCallExecutor,
    tool_calls: Sequence[ToolCall],
    streamed: dict[str, StreamedPlan],
    ctx: TurnContext,
) -> list[ToolReturnMessage]:
    """The replies to a turn's tool calls, in order: streamed plans answer their own calls."""
    if not streamed:
        return await executor.execute(tool_calls, ctx)
    rest = [c for c in tool_calls if c.id not in streamed]
    rest_replies = iter(await executor.execute(rest, ctx))
    replies: list[ToolReturnMessage] = []
    for call in tool_calls:
        replies.append(await streamed[call.id].reply(call) if call.id in streamed else next(rest_replies))
    return replies
