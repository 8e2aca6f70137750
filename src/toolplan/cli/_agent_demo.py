"""The agent half of ``toolplan demo``: one task, three ways of calling tools, side by side.

The default model is a deterministic `FunctionModel` that plays the ideal ("gold") behaviour of each
mode, reading real tool results from the conversation, so the numbers compare the *protocols*, not
a model's luck. ``--model provider:name`` runs the planning mode with a real model instead.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ..agent import Agent, AgentResult
from ..models import AssistantMessage, Model, ModelMessage, SpendLimits, ToolCall, ToolReturnMessage, infer_model
from ..testing import FunctionInfo, FunctionModel
from ._demo import demo_tools
from ._render import prose, say

__all__ = ("AGENT_MODES", "AGENT_TASK", "demo_agent", "demo_model", "real_demo_model", "run_agent_demo", "tool_calls")

AGENT_TASK = "Is Tokyo warmer than London, and Paris warmer than New York? Summarise both comparisons."
SIMULATED_MODEL_LATENCY = 0.2  # seconds per request of the demo model, to make wall times realistic

_CITIES = ("Tokyo", "London", "Paris", "New York")
_PAIRS = (("Tokyo", "London"), ("Paris", "New York"))


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # a plain-text tool result


def _results(messages: list[ModelMessage]) -> list[Any]:
    return [_value(m.content) for m in messages if isinstance(m, ToolReturnMessage)]


def _call(n: int, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(id=f"call_{n}", name=name, arguments=json.dumps(args))


def _one_per_turn(messages: list[ModelMessage]) -> AssistantMessage:
    got = _results(messages)
    n = len(got)
    if n < 4:
        return AssistantMessage(tool_calls=(_call(n, "get_weather", {"location": _CITIES[n]}),))
    weather = {w["location"]: w for w in got[:4]}
    if n < 6:
        a, b = _PAIRS[n - 4]
        return AssistantMessage(tool_calls=(_call(n, "compare_data", {"data_a": weather[a], "data_b": weather[b]}),))
    if n == 6:
        return AssistantMessage(tool_calls=(_call(n, "summarise", {"comparisons": got[4:6]}),))
    return AssistantMessage(content=f"Done: {got[6]}")


def _parallel(messages: list[ModelMessage]) -> AssistantMessage:
    got = _results(messages)
    if not got:
        return AssistantMessage(
            tool_calls=tuple(_call(i, "get_weather", {"location": c}) for i, c in enumerate(_CITIES))
        )
    weather = {w["location"]: w for w in got[:4]}
    if len(got) == 4:
        return AssistantMessage(
            tool_calls=tuple(
                _call(4 + i, "compare_data", {"data_a": weather[a], "data_b": weather[b]})
                for i, (a, b) in enumerate(_PAIRS)
            )
        )
    if len(got) == 6:
        return AssistantMessage(tool_calls=(_call(6, "summarise", {"comparisons": got[4:6]}),))
    return AssistantMessage(content=f"Done: {got[6]}")


PLAN: dict[str, Any] = {
    "steps": [
        *({"id": c.lower().replace(" ", "_"), "tool": "get_weather", "arguments": {"location": c}} for c in _CITIES),
        {"id": "cmp1", "tool": "compare_data", "arguments": {"data_a": "$ref:tokyo", "data_b": "$ref:london"}},
        {"id": "cmp2", "tool": "compare_data", "arguments": {"data_a": "$ref:paris", "data_b": "$ref:new_york"}},
        {"id": "summary", "tool": "summarise", "arguments": {"comparisons": ["$ref:cmp1", "$ref:cmp2"]}},
    ],
    "output_steps": ["summary"],
}


def _planning(messages: list[ModelMessage]) -> AssistantMessage:
    replies = [m for m in messages if isinstance(m, ToolReturnMessage)]
    if not replies:
        return AssistantMessage(tool_calls=(_call(0, "execute_tool_plan", PLAN),))
    return AssistantMessage(content=f"Done: {json.loads(replies[0].content)['outputs']['summary']}")


def demo_model(mode: str) -> FunctionModel:
    """The deterministic demo model for ``mode`` ("one_per_turn", "parallel" or "planning")."""
    play: Callable[[list[ModelMessage]], AssistantMessage] = {
        "one_per_turn": _one_per_turn,
        "parallel": _parallel,
        "planning": _planning,
    }[mode]

    async def respond(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        await asyncio.sleep(SIMULATED_MODEL_LATENCY)
        return play(messages)

    return FunctionModel(respond, model_name=f"toolplan-demo-{mode}")


def real_demo_model(spec: str) -> Model:
    """The model ``--model spec`` names, checked before the demo runs anything.

    Raises:
        ToolplanError: An unknown provider, a missing extra or a missing API key (no network I/O).
    """
    model = infer_model(spec)
    model.check_credentials()
    return model


@dataclass(frozen=True, slots=True)
class _Row:
    mode: str
    result: AgentResult
    seconds: float


AGENT_MODES = (  # label, the demo model's mode, agent strategy, tool planning
    ("one call per turn", "one_per_turn", "sequential", False),
    ("parallel calls", "parallel", "native", False),
    ("one plan", "planning", "native", True),
)


def demo_agent(model: Model, strategy: str, planning: bool, spend: SpendLimits | None = None) -> Agent:
    """The demo's agent: its tools and instructions, one of `AGENT_MODES`' strategies, and model spend caps."""
    return Agent(
        model=model,
        spend=spend,
        tools=demo_tools(),
        strategy=strategy,
        tool_planning=planning,
        instructions="Answer the user's question using the tools.",
        on_limit="return",  # the table shows how a mode ended, limits included
    )


def tool_calls(result: AgentResult) -> int:
    """The tools a run called: the steps of its plans, or its direct calls."""
    return sum(len(p.steps) for p in result.plan_results) or result.tool_calls


async def _run_all(
    model: Model | None,
    on_start: Callable[[str, int, int], None] | None = None,
    spend: SpendLimits | None = None,
) -> list[_Row]:
    rows: list[_Row] = []
    modes = [m for m in AGENT_MODES if model is None or m[3]]
    for n, (label, key, strategy, planning) in enumerate(modes, start=1):
        if on_start is not None:
            on_start(label, n, len(modes))
        agent = demo_agent(model or demo_model(key), strategy, planning, spend)
        start = time.perf_counter()
        result = await agent.run(AGENT_TASK)
        rows.append(_Row(label, result, time.perf_counter() - start))
    return rows


def _run_with_progress(console: Console, model: Model | None, spend: SpendLimits | None) -> list[_Row]:
    """Run every mode, saying which one runs: a spinner on a terminal, one line per mode otherwise."""
    if not console.is_terminal:
        return asyncio.run(
            _run_all(model, lambda label, n, total: say(console, f"Running: {label} ({n} of {total})"), spend)
        )
    with console.status("Running the agents…") as status:
        return asyncio.run(
            _run_all(
                model, lambda label, n, total: status.update(f"Running the task: {label} ({n} of {total})…"), spend
            )
        )


def run_agent_demo(console: Console, model: Model | None = None, spend: SpendLimits | None = None) -> None:
    """Run the task in each mode and print requests, tokens and time side by side (each run capped by ``spend``)."""
    say(console, "")
    say(console, "Agents: the same task with three ways of calling tools.", "bold")
    prose(console, f"Task: {AGENT_TASK}", "dim")
    if model is None:
        prose(
            console,
            "Model: toolplan's built-in deterministic demo model (a FunctionModel that plays the ideal behaviour "
            f"of each mode; not an LLM; {SIMULATED_MODEL_LATENCY:.1f}s simulated latency per request). "
            "Tokens are approximate (words and punctuation). Pass --model provider:name for a real model.",
            "yellow",
        )
    else:
        say(console, f"Model: {model.name} ({model.provider}), a real model, planning mode only.", "yellow")
    rows = _run_with_progress(console, model, spend)
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("mode", no_wrap=True)
    for column in ("requests", "tokens in", "tokens out", "tool calls", "wall time"):
        table.add_column(column, justify="right")
    for row in rows:
        r = row.result
        calls = tool_calls(r)
        table.add_row(
            row.mode,
            str(r.usage.requests),
            str(r.usage.input_tokens),
            str(r.usage.output_tokens),
            str(calls),
            f"{row.seconds:.2f}s",
        )
    console.print(table)
    planned = rows[-1].result
    prose(console, f"Planning mode answer ({planned.status}): {planned.output}", "bold green")
    if planned.plan_results:
        say(console, f"The plan was written by: {planned.model_name or 'the model'}.", "dim")
