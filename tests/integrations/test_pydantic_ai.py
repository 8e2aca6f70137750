"""The pydantic-ai capability in a real pydantic-ai agent, driven by pydantic-ai's FunctionModel."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import BaseModel

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from toolplan import ToolRegistry, execute_plan
from toolplan.agent._metatools import DETAILED_PLAN_SCHEMA_MAX_TOOLS
from toolplan.integrations._common import PlanOutcome
from toolplan.integrations.pydantic_ai import ToolPlanning

CALLS: list[str] = []


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    CALLS.append(f"get_weather:{city}")
    if city == "Atlantis":
        raise ModelRetry("No such city: Atlantis")
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 10)}


def compare(ctx: RunContext[str], a: float, b: float) -> str:
    """Compare two temperatures."""
    CALLS.append(f"compare:{a}:{b}:{ctx.deps}")
    return f"{abs(a - b)} degrees apart"


def delete_city(city: str) -> str:
    """Delete a city (needs approval)."""
    CALLS.append(f"delete_city:{city}")
    return "deleted"


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}


def _agent(plan: dict[str, Any], seen: list[list[ModelMessage]], planning: ToolPlanning) -> Agent[str, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            assert "execute_tool_plan" in {t.name for t in info.function_tools}
            assert "## Tool plans" in (info.instructions or "")
            return ModelResponse(parts=[ToolCallPart("execute_tool_plan", plan, tool_call_id="p1")])
        return ModelResponse(parts=[TextPart("done")])

    return Agent(
        FunctionModel(model),
        deps_type=str,
        tools=[get_weather, Tool(compare, takes_ctx=True), Tool(delete_city, requires_approval=True)],
        capabilities=[planning],
    )


def _plan_return(messages: list[ModelMessage]) -> ToolReturnPart:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_name == "execute_tool_plan":
                    return part
    raise AssertionError("no execute_tool_plan return")


async def test_one_turn_runs_three_tools_through_pydantic_ai_with_dataflow() -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    planning = ToolPlanning(outcomes=[])
    result = await _agent(PLAN, seen, planning).run("Compare Oslo and Rome", deps="d")
    assert result.output == "done"
    assert sorted(CALLS) == ["compare:4.0:19.0:d", "get_weather:Oslo", "get_weather:Rome"]
    content = str(_plan_return(seen[1]).content)
    assert "15.0 degrees apart" in content and "Oslo" not in content  # only the output steps come back
    assert planning.outcomes is not None and planning.outcomes[0].result is not None
    assert planning.outcomes[0].result.status == "succeeded"
    assert result.usage.tool_calls == 4  # three nested calls counted by pydantic-ai, plus the plan call


async def test_a_failed_step_comes_back_as_the_result() -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    plan = json.loads(json.dumps(PLAN).replace('"Rome"', '"Atlantis"'))
    await _agent(plan, seen, ToolPlanning()).run("Compare", deps="d")
    content = str(_plan_return(seen[1]).content)
    assert "No such city: Atlantis" in content
    assert not any(c.startswith("compare") for c in CALLS)


async def test_the_host_tool_call_limit_binds_nested_calls() -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    planning = ToolPlanning(outcomes=[])
    await _agent(PLAN, seen, planning).run("Compare", deps="d", usage_limits=UsageLimits(tool_calls_limit=2))
    assert len(CALLS) == 2
    assert planning.outcomes is not None and planning.outcomes[0].result is not None
    statuses = {s.id: s.status for s in planning.outcomes[0].result.steps.values()}
    assert statuses["cmp"] == "not_run"
    assert "not_run" in str(_plan_return(seen[1]).content)


@pytest.mark.parametrize(
    "bad_step",
    [
        {"id": "x", "tool": "get_wether", "arguments": {}},
        {"id": "x", "tool": "get_weather", "arguments": {"city": 3}},  # pydantic-ai's own validation
        {"id": "x", "tool": "delete_city", "arguments": {"city": "Oslo"}},  # needs approval
    ],
)
async def test_an_invalid_plan_runs_nothing(bad_step: dict[str, Any]) -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    plan = {"steps": [*PLAN["steps"], bad_step]}
    await _agent(plan, seen, ToolPlanning()).run("Compare", deps="d")
    assert CALLS == []
    answer = _plan_return(seen[1])
    assert answer.outcome == "retried"  # pydantic-ai asks the model to fix the plan
    assert "no tool was called" in str(answer.content) and "step 'x'" in str(answer.content)


async def test_pydantic_ai_tools_plug_into_toolplan_directly() -> None:
    CALLS.clear()
    registry = ToolRegistry(cast(Any, [Tool(get_weather), Tool(compare_plain := _compare_plain)]))
    assert compare_plain is _compare_plain
    result = await execute_plan(PLAN, registry)
    assert result.status == "succeeded" and result.outputs == {"cmp": "15.0 degrees apart"}


def _compare_plain(a: float, b: float) -> str:
    """Compare two temperatures."""
    return f"{abs(a - b)} degrees apart"


_compare_plain.__name__ = "compare"


class _SeeToolCalls(AbstractCapability[Any]):
    """A host capability: its hook sees every nested call, under the plan call's id."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def before_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: Any, args: Any) -> Any:
        self.seen.append((call.tool_name, call.tool_call_id))
        return args


async def test_host_hooks_see_the_nested_calls_under_the_plan_call() -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    hook = _SeeToolCalls()
    agent = _agent(PLAN, seen, ToolPlanning())
    await agent.run("Compare", deps="d", capabilities=[hook])
    nested = sorted(name for name, call_id in hook.seen if call_id.startswith("p1."))
    assert nested == ["compare", "get_weather", "get_weather"]
    assert ("execute_tool_plan", "p1") in hook.seen


class Place(BaseModel):
    city: str
    country: str


def forecast(place: Place, days: int) -> str:
    """A forecast (a nested model: its schema has $defs)."""
    return f"{days} days of sun in {place.city}, {place.country}"


async def test_pydantic_ais_own_test_model_sends_a_valid_plan() -> None:
    from pydantic_ai.models.test import TestModel

    outcomes: list[PlanOutcome] = []
    agent = Agent(TestModel(), tools=[forecast], capabilities=[ToolPlanning(outcomes=outcomes)])

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    result = await agent.run("hi")
    assert [o.is_error for o in outcomes] == [False]
    record = outcomes[0].result
    assert record is not None and record.status == "succeeded"
    assert [s.output for s in record.steps.values()] == ["0 days of sun in a, a"]  # the first tool, real arguments
    plan_text = json.loads(result.output)["execute_tool_plan"]
    assert plan_text == '{"status":"succeeded","outputs":{"a":"0 days of sun in a, a"}}'


async def test_test_model_call_tools_leaves_the_plan_tool_out() -> None:
    from pydantic_ai.models.test import TestModel

    outcomes: list[PlanOutcome] = []
    agent = Agent(TestModel(call_tools=["forecast"]), tools=[forecast], capabilities=[ToolPlanning(outcomes=outcomes)])
    assert (await agent.run("hi")).output == '{"forecast":"0 days of sun in a, a"}' and outcomes == []


async def test_the_plan_schema_names_the_run_tools_and_their_arguments() -> None:
    seen: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(t.parameters_json_schema for t in info.function_tools if t.name == "execute_tool_plan")
        return ModelResponse(parts=[TextPart("done")])

    await Agent(FunctionModel(model), tools=[forecast, get_weather], capabilities=[ToolPlanning()]).run("hi")
    (schema,) = seen
    variants = schema["properties"]["steps"]["items"]["anyOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == ["forecast", "get_weather"]
    assert variants[1]["properties"]["arguments"]["required"] == ["city"]
    place = variants[0]["properties"]["arguments"]["properties"]["place"]
    assert place == {"$ref": "#/$defs/forecast__Place"} and "forecast__Place" in schema["$defs"]
    assert variants[0]["properties"]["fallback"]["properties"]["tool"]["enum"] == ["forecast", "get_weather"]


async def test_a_large_catalog_gets_the_tool_names_only() -> None:
    seen: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(t.parameters_json_schema for t in info.function_tools if t.name == "execute_tool_plan")
        return ModelResponse(parts=[TextPart("done")])

    def make(i: int) -> Tool[Any]:
        def f(x: int) -> int:
            return x + i

        return Tool(f, name=f"t{i}")

    count = DETAILED_PLAN_SCHEMA_MAX_TOOLS + 1
    await Agent(FunctionModel(model), tools=[make(i) for i in range(count)], capabilities=[ToolPlanning()]).run("hi")
    step = seen[0]["properties"]["steps"]["items"]
    assert step["properties"]["tool"]["enum"] == [f"t{i}" for i in range(count)]
    assert step["properties"]["arguments"]["type"] == "object" and "$defs" not in seen[0]


async def test_without_tools_the_plan_tool_is_not_offered() -> None:
    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        return ModelResponse(parts=[TextPart("done")])

    await Agent(FunctionModel(model), capabilities=[ToolPlanning()]).run("hi")
    assert offered == [[]]


async def test_a_plan_naming_a_tool_pydantic_ai_still_hides_runs_nothing() -> None:
    CALLS.clear()
    seen: list[list[ModelMessage]] = []
    plan = {
        "steps": [
            {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": 1}},
        ]
    }

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            assert "compare" not in {t.name for t in info.function_tools}  # hidden until found
            return ModelResponse(parts=[ToolCallPart("execute_tool_plan", plan, tool_call_id="p1")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[str, str] = Agent(
        FunctionModel(model),
        deps_type=str,
        tools=[get_weather, Tool(compare, takes_ctx=True, defer_loading=True)],
        capabilities=[ToolPlanning()],
    )
    await agent.run("hi", deps="d")
    reply = seen[1][-1].parts[0]
    assert "not available yet: search for it first" in str(getattr(reply, "content", ""))
    assert CALLS == []  # an invalid plan runs nothing
