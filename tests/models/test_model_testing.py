from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date
from enum import Enum
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from toolplan import Agent, ToolRegistry, UnexpectedModelBehavior, UserError, tool, validate_plan
from toolplan.agent import BatchTool
from toolplan.models import (
    AssistantMessage,
    ModelMessage,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolReturnMessage,
    Usage,
    UserMessage,
)
from toolplan.sandbox import MontyRunner
from toolplan.testing import (
    FunctionInfo,
    FunctionModel,
    ScriptedModel,
    TestModel,
    ToolCallChunk,
    schema_value,
)
from toolplan.tools import ToolDefinition


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


class Place(BaseModel):
    city: str = Field(min_length=3)
    country: str | None = None


@tool
def get_weather(place: Place, unit: Unit, days: Annotated[int, Field(ge=1, le=7)], when: date) -> dict[str, Any]:
    """Weather for a place."""
    return {"city": place.city, "temp": 21}


@tool
def tag(labels: list[Literal["a", "b"]], ratio: Annotated[float, Field(gt=0.5, lt=1)], note: str = "x") -> str:
    """Tag things."""
    return "ok"


HI: list[ModelMessage] = [UserMessage(content="Hello, world!")]


async def collect(events: AsyncIterator[ModelStreamEvent]) -> list[ModelStreamEvent]:
    return [event async for event in events]


@pytest.mark.parametrize("fn", [get_weather, tag])
def test_schema_values_validate(fn: Any) -> None:
    schema = dict(fn.definition.parameters_json_schema)
    value = schema_value(schema)
    jsonschema.validate(value, schema)
    fn.validate_arguments(fn.name, value)  # pydantic agrees too


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email"},
        {"type": "string", "minLength": 5, "maxLength": 6},
        {"type": "integer", "exclusiveMinimum": 3, "multipleOf": 2},
        {"type": "number", "minimum": -5, "maximum": -1},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
        {"type": ["null", "integer"]},
        {"const": 3},
        {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}]},
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}], "required": ["a"]},
        {
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                }
            },
            "$ref": "#/$defs/Node",
        },
    ],
)
def test_schema_values_for_shapes(schema: dict[str, Any]) -> None:
    jsonschema.validate(schema_value(schema), schema)


async def test_test_model_calls_every_tool_then_summarises() -> None:
    model = TestModel()
    tools = [get_weather.definition, tag.definition]
    first = await model.request(HI, tools)
    assert [c.name for c in first.message.tool_calls] == ["get_weather", "tag"]
    assert first.finish_reason == "tool_calls"
    for call, definition in zip(first.message.tool_calls, tools, strict=True):
        jsonschema.validate(call.parse_arguments(), dict(definition.parameters_json_schema))

    returns = [
        ToolReturnMessage(tool_call_id=first.message.tool_calls[0].id, name="get_weather", content='{"temp": 21}'),
        ToolReturnMessage(tool_call_id=first.message.tool_calls[1].id, name="tag", content="no", is_error=True),
    ]
    second = await model.request([*HI, first.message, *returns], tools)
    assert second.message.tool_calls == ()
    assert json.loads(second.message.content or "") == {"get_weather": {"temp": 21}, "tag": {"error": "no"}}
    assert second.finish_reason == "stop"

    assert len(model.requests) == 2
    assert model.requests[1].messages[-1] == returns[-1]
    assert model.requests[0].tools == tuple(tools)
    assert model.usage.requests == 2
    assert model.usage.input_tokens > 0 and model.usage.output_tokens > 0
    assert model.usage == first.usage + second.usage


async def test_test_model_options() -> None:
    model = TestModel(call_tools=["tag"], custom_output_text="Done.")
    first = await model.request(HI, [get_weather.definition, tag.definition])
    assert [c.name for c in first.message.tool_calls] == ["tag"]
    call = first.message.tool_calls[0]
    back = ToolReturnMessage(tool_call_id=call.id, name="tag", content='"ok"')
    assert (await model.request([*HI, first.message, back], [tag.definition])).message.content == "Done."
    assert (await TestModel().request(HI, [])).message.content == "success (no tool calls)"
    with pytest.raises(UserError, match="not offered: nope"):
        await TestModel(call_tools=["nope"]).request(HI, [tag.definition])


async def test_test_model_streams_in_chunks() -> None:
    model = TestModel(chunk_size=5)
    events = await collect(model.stream(HI, [tag.definition]))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    deltas = [e for e in events if isinstance(e, ToolCallArgsDelta)]
    assert [e.name for e in started] == ["tag"]
    assert len(deltas) > 1 and all(len(d.delta) <= 5 for d in deltas)
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert "".join(d.delta for d in deltas) == final.response.message.tool_calls[0].arguments
    assert model.requests[0].stream is True


async def test_function_model_sees_messages_and_tools() -> None:
    seen: list[FunctionInfo] = []

    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        seen.append(info)
        if isinstance(messages[-1], ToolReturnMessage):
            return AssistantMessage(content=f"It is {messages[-1].content}.")
        return AssistantMessage(tool_calls=(ToolCall(id="c1", name="tag", arguments='{"labels": ["a"]}'),))

    model = FunctionModel(answer)
    first = await model.request(HI, [tag.definition], ModelSettings(temperature=0))
    assert first.message.tool_calls[0].parse_arguments() == {"labels": ["a"]}
    back = ToolReturnMessage(tool_call_id="c1", name="tag", content="ok")
    second = await model.request([*HI, first.message, back], [tag.definition])
    assert second.message.content == "It is ok."
    assert seen[0].tools == (tag.definition,)
    assert seen[0].settings == ModelSettings(temperature=0)
    assert seen[0].stream is False
    assert model.usage.requests == 2 and model.usage.output_tokens > 0


async def test_function_model_async_function_and_replayed_stream() -> None:
    async def answer(messages: list[ModelMessage], info: FunctionInfo) -> str:
        return "plain text"

    model = FunctionModel(answer)
    assert (await model.request(HI, [])).message.content == "plain text"
    events = await collect(model.stream(HI, []))
    assert events[0] == TextDelta(text="plain text")
    assert isinstance(events[-1], ResponseCompleted)


async def test_function_model_streams_tool_call_arguments_token_by_token() -> None:
    tokens = ['{"', "labels", '":', ' ["', "a", '"]', "}"]
    streamed: list[bool] = []

    async def stream(messages: list[ModelMessage], info: FunctionInfo) -> AsyncIterator[str | ToolCallChunk]:
        streamed.append(info.stream)
        yield "Let me tag. "
        yield ToolCallChunk(index=0, name="tag", id="call_x")
        for token in tokens:
            yield ToolCallChunk(index=0, arguments=token)
        yield ToolCallChunk(index=1, name="tag", arguments='{"labels": []}')

    model = FunctionModel(stream_function=stream)
    events = await collect(model.stream(HI, [tag.definition]))
    assert events[:3] == [
        TextDelta(text="Let me tag. "),
        ToolCallStarted(index=0, id="call_x", name="tag"),
        ToolCallArgsDelta(index=0, id="call_x", delta='{"'),
    ]
    assert [e.delta for e in events if isinstance(e, ToolCallArgsDelta) and e.index == 0] == tokens
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert [c.parse_arguments() for c in final.response.message.tool_calls] == [{"labels": ["a"]}, {"labels": []}]
    assert final.response.finish_reason == "tool_calls"
    assert final.response.usage.output_tokens > 0

    # request() collects the same stream
    response = await model.request(HI, [tag.definition])
    assert response.message == final.response.message
    assert streamed == [True, False]


async def test_function_model_needs_a_function() -> None:
    with pytest.raises(UserError):
        FunctionModel()

    def bad(messages: list[ModelMessage], info: FunctionInfo) -> list[Any]:
        return [42]

    with pytest.raises(UserError, match="yield str for text"):
        await collect(FunctionModel(stream_function=bad).stream(HI, []))


async def test_scripted_model_plays_the_script_then_fails_loudly() -> None:
    call = ToolCall(id="c1", name="tag", arguments='{"labels": ["b"]}')
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(call,)),
            ModelResponse(
                message=AssistantMessage(content="done"), usage=Usage(requests=1, input_tokens=9, output_tokens=1)
            ),
        ]
    )
    first = await model.request(HI, [tag.definition])
    assert first.message.tool_calls == (call,)
    assert model.remaining == 1
    with pytest.raises(AssertionError, match="1 of 2 scripted responses were never requested"):
        model.assert_consumed()
    second = await model.request(HI, [])
    assert second.usage == Usage(requests=1, input_tokens=9, output_tokens=1)  # given usage is kept
    model.assert_consumed()
    with pytest.raises(UnexpectedModelBehavior, match="request #3 but its script has only 2"):
        await model.request(HI, [])
    assert len(model.requests) == 3


async def test_scripted_model_streams_small_chunks_and_raises_scripted_errors() -> None:
    call = ToolCall(id="c1", name="tag", arguments='{"labels": ["a", "b"]}')
    model = ScriptedModel(["Hello there", AssistantMessage(tool_calls=(call,)), RuntimeError("boom")], chunk_size=3)
    text_events = await collect(model.stream(HI, []))
    assert [e.text for e in text_events if isinstance(e, TextDelta)] == ["Hel", "lo ", "the", "re"]
    call_events = await collect(model.stream(HI, [tag.definition]))
    deltas = [e.delta for e in call_events if isinstance(e, ToolCallArgsDelta)]
    assert "".join(deltas) == call.arguments and max(map(len, deltas)) == 3
    with pytest.raises(RuntimeError, match="boom"):
        await model.request(HI, [])
    model.assert_consumed()


def test_tool_definition_default_schema_gets_empty_args() -> None:
    assert schema_value(ToolDefinition(name="now").parameters_json_schema) == {}


@pytest.mark.parametrize("stream_plans", [False, True])
async def test_test_model_sends_a_valid_plan_when_planning_is_offered(stream_plans: bool) -> None:
    model = TestModel()
    agent = Agent(model=model, tools=[get_weather, tag], tool_planning=True, stream_plans=stream_plans)
    result = await agent.run("go")
    asked = result.messages[2]  # system, user, then the model's one call
    assert isinstance(asked, AssistantMessage)
    [call] = asked.tool_calls
    assert call.name == "execute_tool_plan"
    plan = call.parse_arguments()
    report = validate_plan(plan, agent.registry)
    assert (report.errors, report.warnings) == ((), ())
    assert [s["tool"] for s in plan["steps"]] == ["get_weather", "tag"]
    assert result.status == "completed" and result.tool_calls == 1
    [run] = result.plan_results
    assert run.status == "succeeded" and run.outputs == {"get_weather": {"city": "aaa", "temp": 21}, "tag": "ok"}
    assert json.loads(result.output) == {"execute_tool_plan": {"status": "succeeded", "outputs": run.outputs}}


async def test_test_model_sends_batches_and_code_through_their_meta_tools() -> None:
    registry = ToolRegistry([get_weather, tag])
    batch = BatchTool(registry).definitions()[0]
    model = TestModel()
    first = await model.request(HI, [*registry.definitions(), batch])
    [call] = first.message.tool_calls
    assert call.name == "execute_plan"
    assert validate_plan(call.parse_arguments(), registry, dialect="batch").errors == ()

    only_plan = TestModel(call_tools=["execute_tool_plan"])  # a meta-tool alone takes every offered tool
    agent = Agent(model=only_plan, tools=[get_weather, tag], tool_planning=True)
    assert (await agent.run("go")).plan_results[0].outputs == {"get_weather": {"city": "aaa", "temp": 21}, "tag": "ok"}

    code = Agent(model=TestModel(), tools=[get_weather, tag], code_execution=MontyRunner())
    ran = await code.run("go")
    asked = ran.messages[2]
    assert isinstance(asked, AssistantMessage) and asked.tool_calls[0].name == "execute_code"
    assert json.loads(ran.output)["execute_code"] == {
        "status": "ok",
        "result": {"get_weather": {"city": "aaa", "temp": 21}, "tag": "ok"},
    }
