from __future__ import annotations

from typing import Any

import pytest

from toolplan import ModelAuthError, ModelConnectionError, ModelHTTPError, UserError
from toolplan.models import (
    AnthropicModel,
    AssistantMessage,
    ModelMessage,
    ModelSettings,
    ModelStreamEvent,
    ResponseCompleted,
    RetryConfig,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolReturnMessage,
    Usage,
    UserMessage,
)
from toolplan.testing import Canned, FakeProvider, anthropic_sse, forbid_model_requests
from toolplan.tools import ToolDefinition

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK: list[ModelMessage] = [SystemMessage(content="Be brief."), UserMessage(content="Weather in Tokyo and London?")]


def message(content: list[dict[str, Any]], stop: str = "end_turn", usage: tuple[int, int] = (25, 9)) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def args(index: int, partial: str) -> dict[str, Any]:
    return delta(index, {"type": "input_json_delta", "partial_json": partial})


STREAM = anthropic_sse(
    [
        {"type": "message_start", "message": {**message([], usage=(31, 1)), "stop_reason": None}},
        start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        delta(0, {"type": "text_delta", "text": "Checking "}),
        delta(0, {"type": "text_delta", "text": "both."}),
        {"type": "content_block_stop", "index": 0},
        start(1, {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}),
        args(1, ""),
        args(1, '{"city": '),
        args(1, '"Tokyo"}'),
        {"type": "content_block_stop", "index": 1},
        start(2, {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}}),
        args(2, '{"city": "London"}'),
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 44},
        },
        {"type": "message_stop"},
    ]
)


def model(provider: FakeProvider, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=provider.url, api_key="sk-ant-test", **kwargs)


async def collect(events: Any) -> list[ModelStreamEvent]:
    return [event async for event in events]


async def test_request_parallel_tool_use(provider: FakeProvider) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Tokyo"}},
        {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "London"}},
    ]
    provider.queue(Canned(body=message(content, "tool_use", (40, 30))))
    async with model(provider) as m:
        response = await m.request(ASK, [WEATHER], ModelSettings(temperature=0.5))

    assert response.message.content == "Checking both."
    assert [(c.id, c.name, c.parse_arguments()) for c in response.message.tool_calls] == [
        ("toolu_a", "get_weather", {"city": "Tokyo"}),
        ("toolu_b", "get_weather", {"city": "London"}),
    ]
    assert response.usage == Usage(requests=1, input_tokens=40, output_tokens=30)
    assert response.finish_reason == "tool_calls"
    assert response.model_name == "claude-test-1"
    [sent] = provider.requests
    assert sent.path == "/v1/messages"
    assert "sk-ant-test" in (sent.headers.get("x-api-key") or sent.headers["authorization"])
    assert sent.body["system"] == "Be brief."
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Tokyo and London?"}]}
    ]
    assert sent.body["tools"] == [
        {"name": "get_weather", "description": "Weather for a city.", "input_schema": WEATHER.parameters_json_schema}
    ]
    assert sent.body["max_tokens"] == 4096
    assert sent.body["temperature"] == 0.5
    assert "tool_choice" not in sent.body


async def test_tool_results_go_back_in_one_user_turn(provider: FakeProvider) -> None:
    provider.queue(Canned(body=message([{"type": "text", "text": "Tokyo 21, London failed."}])))
    history: list[ModelMessage] = [
        *ASK,
        AssistantMessage(
            content="Checking.",
            tool_calls=(
                ToolCall(id="toolu_a", name="get_weather", arguments='{"city": "Tokyo"}'),
                ToolCall(id="toolu_b", name="get_weather", arguments="not json"),
            ),
        ),
        ToolReturnMessage(tool_call_id="toolu_a", name="get_weather", content='{"temp": 21}'),
        ToolReturnMessage(tool_call_id="toolu_b", name="get_weather", content="unknown city", is_error=True),
    ]
    async with model(provider) as m:
        response = await m.request(history, [WEATHER], ModelSettings(parallel_tool_calls=False, max_tokens=100))

    assert response.message == AssistantMessage(content="Tokyo 21, London failed.")
    assert response.finish_reason == "stop"
    body = provider.requests[0].body
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Tokyo"}},
                {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"_raw_arguments": "not json"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"temp": 21}'},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "unknown city", "is_error": True},
            ],
        },
    ]
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["max_tokens"] == 100


async def test_stream_text_and_input_json_deltas(provider: FakeProvider) -> None:
    provider.queue(Canned(sse=STREAM))
    async with model(provider) as m:
        events = await collect(m.stream(ASK, [WEATHER], ModelSettings(tool_choice="required")))

    assert events[:-1] == [
        TextDelta(text="Checking "),
        TextDelta(text="both."),
        ToolCallStarted(index=0, id="toolu_a", name="get_weather"),
        ToolCallArgsDelta(index=0, id="toolu_a", delta='{"city": '),
        ToolCallArgsDelta(index=0, id="toolu_a", delta='"Tokyo"}'),
        ToolCallStarted(index=1, id="toolu_b", name="get_weather"),
        ToolCallArgsDelta(index=1, id="toolu_b", delta='{"city": "London"}'),
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.message.content == "Checking both."
    assert [c.parse_arguments() for c in final.response.message.tool_calls] == [{"city": "Tokyo"}, {"city": "London"}]
    assert final.response.usage == Usage(requests=1, input_tokens=31, output_tokens=44)
    assert final.response.finish_reason == "tool_calls"
    body = provider.requests[0].body
    assert body["stream"] is True
    assert body["tool_choice"] == {"type": "any"}


async def test_tool_without_arguments_streams_empty_object(provider: FakeProvider) -> None:
    provider.queue(
        Canned(
            sse=anthropic_sse(
                [
                    {"type": "message_start", "message": message([], usage=(5, 1))},
                    start(0, {"type": "tool_use", "id": "toolu_n", "name": "now", "input": {}}),
                    {"type": "content_block_stop", "index": 0},
                    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
                    {"type": "message_stop"},
                ]
            )
        )
    )
    async with model(provider) as m:
        events = await collect(m.stream(ASK, [ToolDefinition(name="now")]))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    [call] = final.response.message.tool_calls
    assert call.parse_arguments() == {}


async def test_auth_error_is_not_retried(provider: FakeProvider) -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    provider.queue(Canned(status=401, body=body), Canned(status=401, body=body))
    async with model(provider) as m:
        with pytest.raises(ModelAuthError, match="invalid x-api-key"):
            await m.request(ASK, [])
    assert len(provider.requests) == 1


async def test_overloaded_is_retried(provider: FakeProvider) -> None:
    provider.queue(
        Canned(status=529, body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Canned(body=message([{"type": "text", "text": "ok"}])),
    )
    async with model(provider) as m:
        response = await m.request(ASK, [])
    assert response.message.content == "ok"
    assert len(provider.requests) == 2


async def test_error_event_before_content_is_retried(provider: FakeProvider) -> None:
    overloaded = anthropic_sse([{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])
    provider.queue(Canned(sse=overloaded), Canned(sse=STREAM))
    async with model(provider) as m:
        events = await collect(m.stream(ASK, [WEATHER]))
    assert isinstance(events[-1], ResponseCompleted)
    assert len(provider.requests) == 2


async def test_error_event_maps_to_its_status(provider: FakeProvider) -> None:
    overloaded = anthropic_sse([{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])
    provider.queue(Canned(sse=overloaded))
    async with model(provider, retry=RetryConfig.no_retries()) as m:
        with pytest.raises(ModelHTTPError) as info:
            await collect(m.stream(ASK, []))
    assert info.value.status_code == 529


async def test_deadline(provider: FakeProvider) -> None:
    provider.queue(Canned(hang=True))
    async with model(provider, retry=RetryConfig(deadline=0.2)) as m:
        with pytest.raises(ModelConnectionError, match="retry deadline"):
            await m.request(ASK, [])


async def test_forbidden(provider: FakeProvider) -> None:
    async with model(provider) as m:
        with forbid_model_requests(), pytest.raises(UserError, match="AnthropicModel"):
            await m.request(ASK, [])
    assert provider.requests == []


async def test_missing_api_key_is_a_user_error(provider: FakeProvider, monkeypatch: Any) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    async with AnthropicModel("claude-test", base_url=provider.url, retry=RetryConfig.no_retries()) as m:
        with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
            await m.request(ASK, [])
    assert provider.requests == []
