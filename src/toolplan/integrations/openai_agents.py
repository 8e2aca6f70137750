"""toolplan in the OpenAI Agents SDK: ``Agent(tools=[*tools, plan_tool(tools)])``.

`plan_tool` returns an Agents SDK ``FunctionTool`` named ``execute_tool_plan`` that runs toolplan
plans over the agent's function tools. Each nested call runs the tool's input guardrails first (a
rejection is that step's failure), then the SDK's own invocation (argument validation, the tool's
failure function, timeouts) in a child ``ToolContext`` that shares the run's context and usage,
inside a function span nested under the plan call's span. Tools that need approval are refused
when the plan is validated: nothing runs.

Needs ``pip install 'toolplan[openai-agents]'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..agent import PLAN_TOOL_NAME
from ..agent._internal import _PLAN_DESCRIPTION
from ..execute import DEFAULT_MAX_VALUE_CHARS, RunLimits
from ..tools import ToolRegistry
from ..tools._internal import AgentsFunctionTool
from ._common import PlanOutcome, plan_schema, require, run_plan

require("agents", "openai-agents", "the OpenAI Agents SDK")

from agents import FunctionTool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

__all__ = ("plan_tool",)

#: Longest plan (JSON text) accepted from the model.
MAX_PLAN_CHARS = 1_000_000


def plan_tool(
    tools: Sequence[FunctionTool] | None = None,
    *,
    limits: RunLimits | None = None,
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
    name: str = PLAN_TOOL_NAME,
    outcomes: list[PlanOutcome] | None = None,
) -> FunctionTool:
    """An Agents SDK ``FunctionTool`` that runs toolplan plans over function tools.

    Args:
        tools: The function tools a plan may call; None for the calling agent's own function tools
            (looked up at each call).
        limits: toolplan's limits for each plan (concurrency, timeouts, budget, step count).
        max_value_chars: Longest value in the text the model gets back.
        name: The plan tool's name.
        outcomes: A list to append each call's outcome to (every step's record), for inspection.
    """
    fixed = list(tools) if tools is not None else None
    # A duplicate name fails now, not at the first call; the schema names the tools (and their arguments).
    known = ToolRegistry([AgentsFunctionTool(t) for t in fixed]) if fixed is not None else None

    async def invoke(ctx: ToolContext[Any], payload: str) -> str:
        if len(payload) > MAX_PLAN_CHARS:
            return f"The plan is {len(payload)} characters long; the most accepted is {MAX_PLAN_CHARS}."
        try:
            plan = json.loads(payload) if payload else {}
        except ValueError as exc:
            return f"The plan is not valid JSON ({exc}): send a JSON object with 'steps'."
        if not isinstance(plan, dict):
            return "The plan must be a JSON object with 'steps'."
        host = fixed if fixed is not None else _agent_function_tools(ctx, name)

        def child(tool_name: str, call_id: str, arguments: str) -> ToolContext[Any]:
            return ToolContext(
                context=ctx.context,
                usage=ctx.usage,
                tool_name=tool_name,
                tool_call_id=f"{ctx.tool_call_id}.{call_id}",
                tool_arguments=arguments,
                agent=ctx.agent,
                run_config=ctx.run_config,
            )

        registry = ToolRegistry([AgentsFunctionTool(t, context=child) for t in host])
        outcome = await run_plan(registry, plan, limits=limits, max_value_chars=max_value_chars)
        if outcomes is not None:
            outcomes.append(outcome)
        return outcome.text

    return FunctionTool(
        name=name,
        description=_PLAN_DESCRIPTION,
        params_json_schema=plan_schema(known),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def _agent_function_tools(ctx: ToolContext[Any], own_name: str) -> list[FunctionTool]:
    agent = ctx.agent
    tools = getattr(agent, "tools", None) or []
    return [t for t in tools if isinstance(t, FunctionTool) and t.name != own_name]
