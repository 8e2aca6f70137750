"""One conformance suite, run against every adapter: the same plans through each framework's agent.

Each host runs a real agent of its framework, driven by that framework's own test model, with the
same two tools (plain functions wrapped the framework's way); the plan is toolplan's. References,
validation before side effects, fail-forward, budgets and the capped model text must behave the
same in every host, and as in toolplan's own agent.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from toolplan.execute import RunLimits
from toolplan.integrations._common import PlanOutcome
from toolplan.plan import Budget

CALLS: list[str] = []


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    CALLS.append(f"get_weather:{city}")
    if city == "Atlantis":
        raise ValueError("No such city: Atlantis")
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 10), "report": "x" * 10_000}


def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    CALLS.append(f"compare:{a}:{b}")
    return f"{abs(a - b)} degrees apart"


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}

# (plan, limits) -> (the text the model read back, the plan's record: PlanOutcome.artifact())
Runner = Callable[[dict[str, Any], RunLimits | None], Awaitable[tuple[str, dict[str, Any]]]]


@dataclass(frozen=True)
class Host:
    name: str
    module: str
    run: Runner


async def _pydantic_ai(plan: dict[str, Any], limits: RunLimits | None) -> tuple[str, dict[str, Any]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolplan.integrations.pydantic_ai import ToolPlanning

    texts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returns:
            texts.append(str(returns[-1].content))
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("execute_tool_plan", plan, tool_call_id="p1")])

    outcomes: list[PlanOutcome] = []
    agent = Agent(
        FunctionModel(model),
        tools=[get_weather, compare],
        capabilities=[ToolPlanning(limits=limits, outcomes=outcomes)],
    )
    await agent.run("go")
    return texts[0], outcomes[0].artifact()


async def _openai_agents(plan: dict[str, Any], limits: RunLimits | None) -> tuple[str, dict[str, Any]]:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolplan.integrations.openai_agents import plan_tool

    model = ScriptedModel([[function_call("execute_tool_plan", plan, call_id="c1")], [assistant_message("done")]])
    outcomes: list[PlanOutcome] = []
    tools: list[Any] = [function_tool(get_weather), function_tool(compare), plan_tool(limits=limits, outcomes=outcomes)]
    await Runner.run(Agent(name="t", model=model, tools=tools), "go", run_config=RunConfig(tracing_disabled=True))
    items = [i for i in model.calls[1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return str(items[-1]["output"]), outcomes[0].artifact()


async def _langchain(plan: dict[str, Any], limits: RunLimits | None) -> tuple[str, dict[str, Any]]:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from toolplan.integrations.langchain import make_plan_tool

    tools: list[Any] = [StructuredTool.from_function(get_weather), StructuredTool.from_function(compare)]
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "execute_tool_plan", "args": plan, "id": "c1"}]),
            AIMessage("done"),
        ]
    )
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode([*tools, make_plan_tool(tools, limits=limits)]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    final = await graph.compile().ainvoke({"messages": [HumanMessage("go")]})
    message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    return str(message.content), dict(message.artifact)


HOSTS = [
    Host("pydantic-ai", "pydantic_ai", _pydantic_ai),
    Host("openai-agents", "agents", _openai_agents),
    Host("langchain", "langgraph", _langchain),
]


@pytest.fixture(params=HOSTS, ids=[h.name for h in HOSTS])
def host(request: pytest.FixtureRequest) -> Host:
    chosen: Host = request.param
    if importlib.util.find_spec(chosen.module) is None:
        pytest.skip(f"{chosen.module} is not installed")
    CALLS.clear()
    return chosen


def _statuses(record: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["status"] for s in record["steps"]}


async def test_references_carry_data_and_only_output_steps_come_back_capped(host: Host) -> None:
    text, record = await host.run(PLAN, None)
    assert sorted(CALLS) == ["compare:4.0:19.0", "get_weather:Oslo", "get_weather:Rome"]
    assert json.loads(text) == {"status": "succeeded", "outputs": {"cmp": "15.0 degrees apart"}}
    assert _statuses(record) == {"oslo": "succeeded", "rome": "succeeded", "cmp": "succeeded"}
    every_output = {**PLAN, "output_steps": ["oslo"]}
    CALLS.clear()
    text, _ = await host.run(every_output, None)
    assert "xxxx" in text and len(text) < 6_000  # the 10,000-character value is capped for the model


async def test_a_failure_stays_local_and_comes_back_as_the_result(host: Host) -> None:
    plan = json.loads(json.dumps(PLAN).replace('"Rome"', '"Atlantis"'))
    plan["steps"].append({"id": "oslo2", "tool": "get_weather", "arguments": {"city": "Oslo"}})
    text, record = await host.run(plan, None)
    assert _statuses(record) == {"oslo": "succeeded", "rome": "failed", "cmp": "skipped", "oslo2": "succeeded"}
    assert not any(c.startswith("compare") for c in CALLS)
    assert "rome" in text and "cmp" in text  # the model hears what failed and what was skipped


async def test_a_budget_leaves_later_steps_not_run(host: Host) -> None:
    text, record = await host.run(PLAN, RunLimits(budget=Budget(max_tool_calls=2)))
    assert len(CALLS) == 2
    assert _statuses(record)["cmp"] == "not_run"
    assert "not_run" in text


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "x", "tool": "get_wether", "arguments": {}},  # unknown tool
        {"id": "x", "tool": "compare", "arguments": {"a": "$ref:nowhere", "b": 1}},  # unknown reference
        {"id": "x", "tool": "compare", "arguments": {"a": "cold", "b": 1}},  # fails the tool's schema
    ],
    ids=["unknown-tool", "unknown-ref", "bad-arguments"],
)
async def test_an_invalid_plan_runs_zero_tools(host: Host, bad: dict[str, Any]) -> None:
    text, record = await host.run({"steps": [*PLAN["steps"], bad]}, None)
    assert CALLS == []
    assert record["status"] == "invalid" and any(e["step"] == "x" for e in record["errors"])
    assert "step 'x'" in text
