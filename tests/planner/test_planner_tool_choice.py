"""`ForceTool`: a named tool_choice, as each provider spells it on the wire (the planner forces its submit tool)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolplan import UserError
from toolplan.models import AnthropicModel, ForceTool, ModelSettings, OpenAIModel, RetryConfig, UserMessage
from toolplan.testing import Canned, FakeProvider
from toolplan.tools import ToolDefinition

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
OTHER = ToolDefinition(name="other", description="Another tool.", parameters_json_schema={"type": "object"})
ASK = [UserMessage(content="Weather in Oslo?")]
CALL = {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": CALL}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test-1",
    "content": [{"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Oslo"}}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 5},
}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


FORCE = ModelSettings(tool_choice=ForceTool("get_weather"), parallel_tool_calls=False)


async def test_openai_compatible_models_name_the_function(provider: FakeProvider) -> None:
    provider.queue(Canned(body=OPENAI_REPLY))
    async with OpenAIModel("m", base_url=f"{provider.url}/v1", api_key="k", retry=RetryConfig.no_retries()) as m:
        response = await m.request(ASK, [OTHER, WEATHER], FORCE)
    assert response.message.tool_calls[0].name == "get_weather"
    body = provider.requests[0].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


async def test_anthropic_models_name_the_tool(provider: FakeProvider) -> None:
    provider.queue(Canned(body=ANTHROPIC_REPLY))
    async with AnthropicModel("claude-test", base_url=provider.url, api_key="k", retry=RetryConfig.no_retries()) as m:
        await m.request(ASK, [OTHER, WEATHER], FORCE)
    body = provider.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}


async def test_forcing_a_tool_the_request_does_not_offer_is_a_user_error_before_any_request(
    provider: FakeProvider,
) -> None:
    async with OpenAIModel("m", base_url=f"{provider.url}/v1", api_key="k") as m:
        with pytest.raises(UserError, match=r"forces tool 'get_weather', which is not among this request's tools \("):
            await m.request(ASK, [OTHER], FORCE)
    async with AnthropicModel("claude-test", base_url=provider.url, api_key="k") as a:
        with pytest.raises(UserError, match="Force one of them, or use 'required'"):
            await a.request(ASK, [OTHER], FORCE)
    assert provider.requests == []


def test_force_tool_values() -> None:
    assert ModelSettings(tool_choice="auto").merge(FORCE).tool_choice == ForceTool("get_weather")
    assert FORCE.merge({"tool_choice": "none"}).tool_choice == "none"
    assert ModelSettings.coerce({"tool_choice": ForceTool("x")}) == ModelSettings(tool_choice=ForceTool("x"))
    for bad in ("", " padded", "x" * 201, 3):
        with pytest.raises(UserError, match="ForceTool takes the name of one of the request's tools"):
            ForceTool(bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"must be 'auto', 'required' or 'none' or ForceTool\(name\), got dict"):
        ModelSettings(tool_choice={"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="must be 'auto', 'required' or 'none', got str 'get_weather'"):
        ModelSettings(tool_choice="get_weather")  # type: ignore[arg-type]
