"""The Agents SDK adapter in a real Agents SDK run, driven by the SDK's ScriptedModel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    set_trace_processors,
    tool_input_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tracing import TracingProcessor

from toolplan import ToolRegistry, execute_plan
from toolplan.execute import RunLimits
from toolplan.integrations._common import PlanOutcome
from toolplan.integrations.openai_agents import plan_tool
from toolplan.plan import Budget

CALLS: list[str] = []


@tool_input_guardrail
def no_atlantis(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    if "Atlantis" in data.context.tool_arguments:
        return ToolGuardrailFunctionOutput.reject_content("Atlantis is off limits.")
    return ToolGuardrailFunctionOutput.allow()


@function_tool(tool_input_guardrails=[no_atlantis])
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    CALLS.append(f"get_weather:{city}")
    if city == "Nowhere":
        raise ValueError("No such city: Nowhere")
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 10)}


@function_tool
def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    CALLS.append(f"compare:{a}:{b}")
    return f"{abs(a - b)} degrees apart"


@function_tool(needs_approval=True)
def delete_city(city: str) -> str:
    """Delete a city."""
    CALLS.append(f"delete_city:{city}")
    return "deleted"


TOOLS: list[FunctionTool] = [get_weather, compare, delete_city]

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}


class _Spans(TracingProcessor):
    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


@pytest.fixture(autouse=True)
def spans() -> Iterator[_Spans]:
    recorder = _Spans()
    set_trace_processors([recorder])  # replaces the exporter: nothing leaves the machine
    yield recorder


async def _run(plan: dict[str, Any], *, limits: RunLimits | None = None) -> tuple[ScriptedModel, list[PlanOutcome]]:
    CALLS.clear()
    model = ScriptedModel([[function_call("execute_tool_plan", plan, call_id="c1")], [assistant_message("done")]])
    outcomes: list[PlanOutcome] = []
    agent = Agent(name="weather", model=model, tools=[*TOOLS, plan_tool(limits=limits, outcomes=outcomes)])
    result = await Runner.run(agent, "Compare Oslo and Rome", run_config=RunConfig(workflow_name="t"))
    assert result.final_output == "done"
    return model, outcomes


def _plan_output(model: ScriptedModel) -> str:
    items = model.calls[1].input
    outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return str(outputs[-1]["output"])


async def test_one_turn_runs_three_tools_with_dataflow_and_nested_spans(spans: _Spans) -> None:
    model, outcomes = await _run(PLAN)
    assert sorted(CALLS) == ["compare:4.0:19.0", "get_weather:Oslo", "get_weather:Rome"]
    text = _plan_output(model)
    assert "15.0 degrees apart" in text and "Oslo" not in text  # only the output steps come back
    assert outcomes[0].result is not None and outcomes[0].result.status == "succeeded"
    functions = [s for s in spans.spans if s.span_data.type == "function"]
    plan_span = next(s for s in functions if s.span_data.name == "execute_tool_plan")
    nested = sorted(s.span_data.name for s in functions if s.parent_id == plan_span.span_id)
    assert nested == ["compare", "get_weather", "get_weather"]


async def test_failures_and_guardrail_rejections_come_back_as_the_result(spans: _Spans) -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"city": "Atlantis"}},
            {"id": "n", "tool": "get_weather", "arguments": {"city": "Nowhere"}},
            {"id": "o", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        ]
    }
    model, outcomes = await _run(plan)
    assert CALLS == ["get_weather:Nowhere", "get_weather:Oslo"] or sorted(CALLS) == [
        "get_weather:Nowhere",
        "get_weather:Oslo",
    ]
    text = _plan_output(model)
    assert "Atlantis is off limits." in text and "No such city: Nowhere" in text
    assert outcomes[0].result is not None
    statuses = {s.id: s.status for s in outcomes[0].result.steps.values()}
    assert statuses == {"a": "failed", "n": "failed", "o": "succeeded"}


async def test_limits_hold(spans: _Spans) -> None:
    _, outcomes = await _run(PLAN, limits=RunLimits(budget=Budget(max_tool_calls=2)))
    assert len(CALLS) == 2
    assert outcomes[0].result is not None and outcomes[0].result.steps["cmp"].status == "not_run"


@pytest.mark.parametrize(
    "bad_step",
    [
        {"id": "x", "tool": "get_wether", "arguments": {}},
        {"id": "x", "tool": "get_weather", "arguments": {"city": 3}},
        {"id": "x", "tool": "delete_city", "arguments": {"city": "Oslo"}},  # needs approval
    ],
)
async def test_an_invalid_plan_runs_nothing(bad_step: dict[str, Any], spans: _Spans) -> None:
    plan = {"steps": [*PLAN["steps"], bad_step]}
    model, outcomes = await _run(plan)
    assert CALLS == []
    assert outcomes[0].result is None
    assert "step 'x'" in _plan_output(model)


async def test_agents_function_tools_plug_into_toolplan_directly() -> None:
    CALLS.clear()
    registry = ToolRegistry(cast(Any, [get_weather, compare]))
    result = await execute_plan(PLAN, registry)
    assert result.status == "succeeded" and result.outputs == {"cmp": "15.0 degrees apart"}
    assert json.loads(json.dumps(registry.definition("compare").parameters_json_schema))["required"] == ["a", "b"]


def test_a_fixed_tool_list_puts_each_tools_arguments_in_the_plan_schema() -> None:
    schema = plan_tool([get_weather, compare]).params_json_schema
    variants = schema["properties"]["steps"]["items"]["anyOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == ["get_weather", "compare"]
    assert variants[1]["properties"]["arguments"]["required"] == ["a", "b"]
    step = plan_tool().params_json_schema["properties"]["steps"]["items"]  # the agent's tools: known at call time
    assert "enum" not in step["properties"]["tool"]
