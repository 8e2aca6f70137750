"""The LangChain adapter in a real LangGraph graph, driven by LangChain's fake chat model."""

from __future__ import annotations

import json
from typing import Any, cast
from uuid import UUID

import pytest

pytest.importorskip("langgraph")

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from toolplan import Agent, ToolRegistry, execute_plan
from toolplan.execute import RunLimits
from toolplan.integrations.langchain import make_plan_tool
from toolplan.models import AssistantMessage, ToolCall
from toolplan.plan import Budget
from toolplan.testing import ScriptedModel

CALLS: list[str] = []


@tool
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    CALLS.append(f"get_weather:{city}")
    if city == "Atlantis":
        raise ToolException("No such city: Atlantis")
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 10)}


@tool
def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    CALLS.append(f"compare:{a}:{b}")
    return f"{abs(a - b)} degrees apart"


TOOLS: list[BaseTool] = [get_weather, compare]

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}


def _graph(plan: dict[str, Any], tools: list[BaseTool]) -> Any:
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "execute_tool_plan", "args": plan, "id": "call_1"}]),
            AIMessage("Done."),
        ]
    )
    seen: list[list[BaseMessage]] = []

    def call_model(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([*tools, make_plan_tool(tools)]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    compiled = graph.compile()
    compiled.seen = seen  # type: ignore[attr-defined]
    return compiled


class _Recorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.tools: dict[UUID, tuple[str, UUID | None]] = {}

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.tools[run_id] = (serialized["name"], parent_run_id)


async def test_one_turn_runs_three_tools_with_dataflow_and_nested_callbacks() -> None:
    CALLS.clear()
    graph = _graph(PLAN, TOOLS)
    recorder = _Recorder()
    custom: list[Any] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage("Compare Oslo and Rome")]},
        config={"callbacks": [recorder]},
        stream_mode=["custom", "values"],
    ):
        if mode == "custom":
            custom.append(chunk)
        else:
            final = chunk
    assert sorted(CALLS) == ["compare:4.0:19.0", "get_weather:Oslo", "get_weather:Rome"]
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert json.loads(str(tool_message.content)) == {"cmp": "15.0 degrees apart"} or "15.0 degrees apart" in str(
        tool_message.content
    )
    assert "oslo" not in str(tool_message.content)  # only the output steps go back to the model
    assert tool_message.artifact["status"] == "succeeded"
    assert {s["id"] for s in tool_message.artifact["steps"]} >= {"oslo", "rome", "cmp"}
    # The nested tool runs hang under the plan tool's run in the callback tree.
    plan_runs = [rid for rid, (name, _) in recorder.tools.items() if name == "execute_tool_plan"]
    assert len(plan_runs) == 1
    nested = sorted(name for name, parent in recorder.tools.values() if parent == plan_runs[0])
    assert nested == ["compare", "get_weather", "get_weather"]
    # Step events went to LangGraph's stream writer.
    assert {c["toolplan"] for c in custom} >= {"plan_started", "step_started", "step_finished", "plan_finished"}
    # The second model request saw the plan's compact result.
    assert isinstance(graph.seen[1][-1], ToolMessage)


async def test_a_failed_step_comes_back_as_the_result_and_skips_dependents() -> None:
    CALLS.clear()
    plan = json.loads(json.dumps(PLAN).replace('"Rome"', '"Atlantis"'))
    graph = _graph(plan, TOOLS)
    final = await graph.ainvoke({"messages": [HumanMessage("Compare")]})
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert "Atlantis" in str(tool_message.content)
    assert "get_weather:Oslo" in CALLS and not any(c.startswith("compare") for c in CALLS)
    statuses = {s["id"]: s["status"] for s in tool_message.artifact["steps"]}
    assert statuses["rome"] == "failed" and statuses["cmp"] == "skipped" and statuses["oslo"] == "succeeded"


async def test_an_invalid_plan_runs_nothing_and_lists_the_problems() -> None:
    CALLS.clear()
    plan = {"steps": [*PLAN["steps"], {"id": "x", "tool": "get_wether", "arguments": {}}]}
    final = await _graph(plan, TOOLS).ainvoke({"messages": [HumanMessage("Compare")]})
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert CALLS == []
    assert "get_wether" in str(tool_message.content)
    assert tool_message.artifact["status"] == "invalid"


async def test_limits_hold() -> None:
    CALLS.clear()
    plan_tool = make_plan_tool(TOOLS, limits=RunLimits(budget=Budget(max_tool_calls=2)))
    message = await plan_tool.ainvoke({"name": plan_tool.name, "args": PLAN, "id": "c1", "type": "tool_call"})
    assert len(CALLS) == 2
    statuses = {s["id"]: s["status"] for s in message.artifact["steps"]}
    assert statuses["cmp"] == "not_run"
    assert "not_run" in str(message.content) or "budget" in str(message.content).lower()


async def test_langchain_tools_plug_into_toolplan_directly() -> None:
    CALLS.clear()
    registry = ToolRegistry(cast(Any, TOOLS))  # foreign tools are adapted at run time
    assert registry.definition("get_weather").parameters_json_schema["properties"]["city"]["type"] == "string"
    result = await execute_plan(PLAN, registry)
    assert result.status == "succeeded"
    assert result.outputs == {"cmp": "15.0 degrees apart"}


async def test_a_toolplan_agent_plans_over_langchain_tools() -> None:
    CALLS.clear()
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name="execute_tool_plan", arguments=json.dumps(PLAN)),)),
            "15 degrees.",
        ]
    )
    result = await Agent(model=model, tools=cast(Any, TOOLS), tool_planning=True).run("Compare")
    assert result.output == "15 degrees."
    assert result.plan_results[0].outputs == {"cmp": "15.0 degrees apart"}
    assert sorted(CALLS) == ["compare:4.0:19.0", "get_weather:Oslo", "get_weather:Rome"]


async def test_a_wrong_value_through_a_reference_never_reaches_a_langchain_tool() -> None:
    CALLS.clear()

    @tool
    def label() -> str:
        """A label."""
        return "warm"

    plan = {
        "steps": [
            {"id": "l", "tool": "label", "arguments": {}},
            {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:l", "b": 1}},
        ]
    }
    result = await execute_plan(plan, ToolRegistry(cast(Any, [*TOOLS, label])))
    error = result.steps["cmp"].error
    assert error is not None and error.kind == "invalid_arguments", error
    assert "argument 'a'" in error.message and "'warm'" in error.message
    assert not any(c.startswith("compare") for c in CALLS)


def test_the_plan_schema_names_each_tool_with_its_arguments() -> None:
    schema = make_plan_tool(TOOLS).args_schema
    assert isinstance(schema, dict)
    variants = schema["properties"]["steps"]["items"]["anyOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == ["get_weather", "compare"]
    assert variants[0]["properties"]["arguments"]["required"] == ["city"]
