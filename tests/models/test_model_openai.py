from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

import pytest
import stamina

from toolplan import ModelAuthError, ModelConnectionError, ModelHTTPError, UnexpectedModelBehavior, UserError
from toolplan.models import (
    AssistantMessage,
    ModelMessage,
    ModelSettings,
    ModelStreamEvent,
    OpenAIModel,
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
from toolplan.testing import Canned, FakeProvider, forbid_model_requests, openai_sse
from toolplan.tools import ToolDefinition

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK: list[ModelMessage] = [SystemMessage(content="Be brief."), UserMessage(content="Weather in Tokyo and London?")]


def completion(message: dict[str, Any], finish: str = "stop", usage: tuple[int, int] = (12, 5)) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test-2024",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test-2024",
        "choices": choices,
        "usage": usage,
    }


def tc(index: int, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {}}
    if id:
        call["id"] = id
        call["type"] = "function"
    if name:
        call["function"]["name"] = name
    if args is not None:
        call["function"]["arguments"] = args
    return {"tool_calls": [call]}


# Two parallel tool calls, arguments streamed in pieces and interleaved, then usage in a last chunk.
PARALLEL_STREAM = openai_sse(
    [
        chunk({"role": "assistant", "content": None}),
        chunk(tc(0, id="call_a", name="get_weather", args="")),
        chunk(tc(0, args='{"ci')),
        chunk(tc(1, id="call_b", name="get_weather", args='{"city"')),
        chunk(tc(0, args='ty": "Tokyo"}')),
        chunk(tc(1, args=': "London"}')),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50}),
    ]
)


def model(provider: FakeProvider, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test", **kwargs)


async def collect(events: Any) -> list[ModelStreamEvent]:
    return [event async for event in events]


async def test_request_parallel_tool_calls(provider: FakeProvider) -> None:
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "London"}'}},
    ]
    provider.queue(Canned(body=completion({"content": None, "tool_calls": calls}, "tool_calls", (40, 18))))
    async with model(provider) as m:
        response = await m.request(ASK, [WEATHER], ModelSettings(parallel_tool_calls=True, max_tokens=50))

    assert response.message == AssistantMessage(
        content=None,
        tool_calls=(
            ToolCall(id="call_a", name="get_weather", arguments='{"city": "Tokyo"}'),
            ToolCall(id="call_b", name="get_weather", arguments='{"city": "London"}'),
        ),
    )
    assert response.usage == Usage(requests=1, input_tokens=40, output_tokens=18)
    assert response.finish_reason == "tool_calls"
    assert response.model_name == "gpt-test-2024"
    [sent] = provider.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Tokyo and London?"},
    ]
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": WEATHER.parameters_json_schema,
            },
        }
    ]
    assert sent.body["parallel_tool_calls"] is True
    assert sent.body["max_tokens"] == 50  # a compatible server: max_tokens, not max_completion_tokens
    assert "stream" not in sent.body


async def test_history_with_tool_results_is_converted(provider: FakeProvider) -> None:
    provider.queue(Canned(body=completion({"content": "Sunny in Tokyo."})))
    history: list[ModelMessage] = [
        *ASK,
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="get_weather", arguments='{"city":"Tokyo"}'),)),
        ToolReturnMessage(tool_call_id="c1", name="get_weather", content='{"temp": 21}'),
    ]
    async with model(provider, settings=ModelSettings(temperature=0.0, extra_body={"repeat_penalty": 1.0})) as m:
        response = await m.request(history, [WEATHER], ModelSettings(extra_body={"top_k": 1}, stop=("END",)))

    assert response.message.content == "Sunny in Tokyo."
    assert response.finish_reason == "stop"
    body = provider.requests[0].body
    assert body["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
    ]
    assert body["temperature"] == 0.0
    assert body["repeat_penalty"] == 1.0 and body["top_k"] == 1  # extra_body merged key by key
    assert body["stop"] == ["END"]


async def test_stream_text(provider: FakeProvider) -> None:
    provider.queue(
        Canned(
            sse=openai_sse(
                [
                    chunk({"role": "assistant", "content": ""}),
                    chunk({"content": "Hel"}),
                    chunk({"content": "lo"}),
                    chunk({}, finish="stop"),
                    chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}),
                ]
            )
        )
    )
    async with model(provider) as m:
        events = await collect(m.stream(ASK, []))

    assert events[:2] == [TextDelta(text="Hel"), TextDelta(text="lo")]
    assert isinstance(events[-1], ResponseCompleted)
    response = events[-1].response
    assert response.message == AssistantMessage(content="Hello")
    assert response.usage == Usage(requests=1, input_tokens=7, output_tokens=2)
    assert response.finish_reason == "stop"
    body = provider.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body and "parallel_tool_calls" not in body


async def test_stream_parallel_tool_call_deltas(provider: FakeProvider) -> None:
    provider.queue(Canned(sse=PARALLEL_STREAM))
    async with model(provider) as m:
        events = await collect(m.stream(ASK, [WEATHER]))

    assert events[:-1] == [
        ToolCallStarted(index=0, id="call_a", name="get_weather"),
        ToolCallArgsDelta(index=0, id="call_a", delta='{"ci'),
        ToolCallStarted(index=1, id="call_b", name="get_weather"),
        ToolCallArgsDelta(index=1, id="call_b", delta='{"city"'),
        ToolCallArgsDelta(index=0, id="call_a", delta='ty": "Tokyo"}'),
        ToolCallArgsDelta(index=1, id="call_b", delta=': "London"}'),
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    calls = final.response.message.tool_calls
    assert [c.parse_arguments() for c in calls] == [{"city": "Tokyo"}, {"city": "London"}]
    assert final.response.usage == Usage(requests=1, input_tokens=30, output_tokens=20)
    assert final.response.finish_reason == "tool_calls"


async def test_closing_a_stream_early_releases_it(provider: FakeProvider) -> None:
    provider.queue(Canned(sse=PARALLEL_STREAM))
    async with model(provider) as m, contextlib.aclosing(m.stream(ASK, [WEATHER])) as stream:
        async for event in stream:
            assert isinstance(event, ToolCallStarted)
            break
    assert len(provider.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_not_retried(provider: FakeProvider, status: int) -> None:
    provider.queue(*[Canned(status=status, body={"error": {"message": "Incorrect API key provided"}})] * 2)
    async with model(provider) as m:
        with pytest.raises(ModelAuthError) as info:
            await m.request(ASK, [])
    assert info.value.status_code == status
    assert info.value.model_name == "gpt-test"
    assert "Incorrect API key provided" in info.value.message
    assert "API key" in info.value.message
    assert len(provider.requests) == 1


async def test_client_errors_are_not_retried(provider: FakeProvider) -> None:
    provider.queue(*[Canned(status=400, body={"error": {"message": "bad tool schema"}})] * 2)
    async with model(provider) as m:
        with pytest.raises(ModelHTTPError) as info:
            await m.request(ASK, [])
    assert info.value.status_code == 400
    assert not isinstance(info.value, ModelAuthError)
    assert "bad tool schema" in info.value.message
    assert len(provider.requests) == 1


async def test_rate_limit_is_retried_then_succeeds(provider: FakeProvider) -> None:
    provider.queue(
        Canned(status=429, body={"error": {"message": "slow down"}}),
        Canned(body=completion({"content": "ok"})),
    )
    async with model(provider) as m:
        response = await m.request(ASK, [])
    assert response.message.content == "ok"
    assert response.usage.requests == 1
    assert len(provider.requests) == 2


async def test_server_errors_are_retried_up_to_the_attempts(provider: FakeProvider) -> None:
    provider.queue(*[Canned(status=503, body={"error": {"message": "overloaded"}})] * 6)
    async with model(provider, retry=RetryConfig(attempts=3)) as m:
        with pytest.raises(ModelHTTPError) as info:
            await m.request(ASK, [])
    assert info.value.status_code == 503
    assert len(provider.requests) == 3


async def test_default_retry_makes_five_attempts(provider: FakeProvider) -> None:
    provider.queue(*[Canned(status=500, body={"error": {"message": "boom"}})] * 6)
    async with model(provider) as m:
        with pytest.raises(ModelHTTPError):
            await m.request(ASK, [])
    assert len(provider.requests) == 5


async def test_stamina_testing_switch_is_honoured(provider: FakeProvider) -> None:
    provider.queue(Canned(status=429, body={}), Canned(body=completion({"content": "ok"})))
    with stamina.set_testing(True, attempts=1):
        async with model(provider) as m:
            with pytest.raises(ModelHTTPError):
                await m.request(ASK, [])
    assert len(provider.requests) == 1


async def test_overall_deadline_is_respected(provider: FakeProvider) -> None:
    provider.queue(Canned(hang=True))
    async with model(provider, retry=RetryConfig(deadline=1.0)) as m:
        with pytest.raises(ModelConnectionError, match=r"retry deadline of 1\.0 s"):
            await m.request(ASK, [])
    assert len(provider.requests) == 1


async def test_deadline_stops_retrying(provider: FakeProvider) -> None:
    provider.queue(*[Canned(status=503, body={"error": {"message": "busy"}})] * 200)
    config = RetryConfig(attempts=200, wait_initial=0.02, wait_max=0.02, wait_jitter=0, deadline=0.3)
    with stamina.set_testing(False):  # real waits: the deadline, not the attempts, ends the retries
        async with model(provider, retry=config) as m:
            with pytest.raises((ModelHTTPError, ModelConnectionError)):
                await m.request(ASK, [])
    assert 1 < len(provider.requests) < 200


async def test_request_timeout_is_a_connection_error(provider: FakeProvider) -> None:
    provider.queue(Canned(hang=True))
    async with model(provider, retry=RetryConfig.no_retries()) as m:
        with pytest.raises(ModelConnectionError, match="did not answer in time"):
            await m.request(ASK, [], ModelSettings(timeout=0.2))


async def test_connection_refused_is_retried_then_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryConfig(attempts=2)) as m:
        with pytest.raises(ModelConnectionError, match="Could not connect"):
            await m.request(ASK, [])


async def test_stream_is_retried_before_its_first_event(provider: FakeProvider) -> None:
    provider.queue(Canned(status=429, body={}), Canned(sse=PARALLEL_STREAM))
    async with model(provider) as m:
        events = await collect(m.stream(ASK, [WEATHER]))
    assert isinstance(events[-1], ResponseCompleted)
    assert len(events[-1].response.message.tool_calls) == 2
    assert len(provider.requests) == 2


async def test_stream_failing_after_an_event_is_not_retried(provider: FakeProvider) -> None:
    error = json.dumps({"error": {"message": "server melted"}})
    broken = [*openai_sse([chunk({"content": "Hel"})])[:-1], f"data: {error}\n\n"]
    provider.queue(Canned(sse=broken), Canned(sse=PARALLEL_STREAM))
    seen: list[ModelStreamEvent] = []
    async with model(provider) as m:
        with pytest.raises(ModelHTTPError, match="server melted"):
            async for event in m.stream(ASK, []):
                seen.append(event)
    assert seen == [TextDelta(text="Hel")]
    assert len(provider.requests) == 1


async def test_empty_stream_is_unexpected(provider: FakeProvider) -> None:
    provider.queue(Canned(sse=[]))
    async with model(provider, retry=RetryConfig.no_retries()) as m:
        with pytest.raises(UnexpectedModelBehavior, match="without sending anything"):
            await collect(m.stream(ASK, []))


async def test_official_api_uses_max_completion_tokens(provider: FakeProvider, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{provider.url}/v1")
    m = OpenAIModel("gpt-test", api_key="sk-test")
    m._official_api = True  # what a model without base_url or OPENAI_BASE_URL decides
    provider.queue(Canned(body=completion({"content": "ok"})))
    async with m:
        await m.request(ASK, [], ModelSettings(max_tokens=9))
    assert provider.requests[0].body["max_completion_tokens"] == 9


async def test_forbidden_requests_fail_before_any_io(provider: FakeProvider) -> None:
    async with model(provider) as m:
        with forbid_model_requests():
            with pytest.raises(UserError, match="forbid_model_requests"):
                await m.request(ASK, [])
            with pytest.raises(UserError, match="forbid_model_requests"):
                await collect(m.stream(ASK, []))
        provider.queue(Canned(body=completion({"content": "ok"})))
        assert (await m.request(ASK, [])).message.content == "ok"  # allowed again after the block
    assert len(provider.requests) == 1


async def test_missing_api_key_is_a_user_error(monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIModel("gpt-4o-mini") as m:
        with pytest.raises(UserError, match="OPENAI_API_KEY"):
            await m.request(ASK, [])


async def test_backoff_follows_the_retry_config(provider: FakeProvider) -> None:
    from stamina.instrumentation import RetryDetails, get_on_retry_hooks, set_on_retry_hooks

    waits: list[float] = []

    def record(details: RetryDetails) -> None:
        waits.append(details.wait_for)

    provider.queue(
        Canned(status=503, body={}),
        Canned(status=502, body={}),
        Canned(status=500, body={}),
        Canned(body=completion({"content": "ok"})),
    )
    config = RetryConfig(attempts=4, wait_initial=0.01, wait_exp_base=3, wait_max=0.05, wait_jitter=0, deadline=10)
    previous = get_on_retry_hooks()
    set_on_retry_hooks([record])
    try:
        with stamina.set_testing(False):  # real (tiny) waits, computed by stamina from the config
            async with model(provider, retry=config) as m:
                assert (await m.request(ASK, [])).message.content == "ok"
    finally:
        set_on_retry_hooks(previous)
    assert waits == pytest.approx([0.01, 0.03, 0.05])
    assert len(provider.requests) == 4
