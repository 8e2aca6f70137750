"""toolplan in LangChain and LangGraph: ``tools = [*tools, make_plan_tool(tools)]``.

`make_plan_tool` returns a LangChain ``StructuredTool`` named ``execute_tool_plan`` with
``response_format="content_and_artifact"``: the content is the text the model reads (the output
steps only, values capped), the artifact the full outcome (every step's record, or the validation
problems). Nested calls go through each tool's ``ainvoke`` with a child config, so callbacks and
traces nest under the plan call; inside a LangGraph graph, every step event is also written to
the stream writer (``stream_mode="custom"``).

Needs ``pip install 'toolplan[langchain]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .._errors import UserError
from ..agent import PLAN_TOOL_NAME
from ..agent._internal import _PLAN_DESCRIPTION
from ..execute import DEFAULT_MAX_VALUE_CHARS, PlanEvent, RunLimits
from ..tools import ToolRegistry
from ..tools._internal import LangChainTool
from ._common import plan_schema, require, run_plan

require("langchain_core", "langchain", "LangChain")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.runnables.config import patch_config  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402

__all__ = ("make_plan_tool",)


def _stream_writer() -> Any:
    try:
        from langgraph.config import get_stream_writer
    except ImportError:
        return None
    try:
        return get_stream_writer()
    except Exception:  # not inside a LangGraph run
        return None


def _event_chunk(event: PlanEvent) -> dict[str, Any]:
    chunk: dict[str, Any] = {"toolplan": event.kind, "run_id": event.run_id}
    if event.kind == "step_started":
        chunk.update(step=event.step_id, tool=event.tool)
    elif event.kind == "step_finished":
        chunk.update(step=event.result.id, status=event.result.status)
    elif event.kind == "plan_finished":
        chunk.update(status=event.result.status)
    return chunk


def make_plan_tool(
    tools: Sequence[BaseTool],
    *,
    limits: RunLimits | None = None,
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
    name: str = PLAN_TOOL_NAME,
) -> StructuredTool:
    """A ``StructuredTool`` that runs toolplan plans over ``tools`` (LangChain tools).

    Give the model both: ``create_react_agent(model, [*tools, make_plan_tool(tools)])``. The tools
    keep their names, schemas and descriptions.

    Args:
        tools: The LangChain tools a plan may call.
        limits: toolplan's limits for each plan (concurrency, timeouts, budget, step count).
        max_value_chars: Longest value in the text the model gets back.
        name: The plan tool's name.
    """
    tools = list(tools)
    known = ToolRegistry([LangChainTool(t) for t in tools])  # fails now, not at the first call, on a duplicate name

    async def execute_tool_plan(
        config: RunnableConfig, callbacks: Any = None, **plan: Any
    ) -> tuple[str, dict[str, Any]]:
        child = patch_config(config, callbacks=callbacks) if callbacks is not None else config
        registry = ToolRegistry([LangChainTool(t, config=child) for t in tools])
        writer = _stream_writer()
        outcome = await run_plan(
            registry,
            plan,
            limits=limits,
            max_value_chars=max_value_chars,
            on_event=(lambda event: writer(_event_chunk(event))) if writer is not None else None,
        )
        return outcome.text, outcome.artifact()

    def execute_tool_plan_sync(
        config: RunnableConfig, callbacks: Any = None, **plan: Any
    ) -> tuple[str, dict[str, Any]]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(execute_tool_plan(config, callbacks, **plan))
        raise UserError(f"{name} was invoked synchronously inside an event loop: use `await tool.ainvoke(...)`.")

    execute_tool_plan.__annotations__["config"] = RunnableConfig
    execute_tool_plan_sync.__annotations__["config"] = RunnableConfig
    return StructuredTool.from_function(
        func=execute_tool_plan_sync,
        coroutine=execute_tool_plan,
        name=name,
        description=_PLAN_DESCRIPTION,
        args_schema=plan_schema(known),
        response_format="content_and_artifact",
    )
