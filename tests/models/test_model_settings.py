"""Model settings given as `ModelSettings` or as a plain mapping, with every model; bad ones fail early."""

from __future__ import annotations

from typing import Any

import pytest

from toolplan import Agent, UserError
from toolplan.models import AnthropicModel, ModelSettings, OpenAIModel, UserMessage
from toolplan.testing import Canned, FakeProvider, TestModel

OK_OPENAI = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
OK_ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


# Typed Any: Agent's `settings` parameter is still annotated `ModelSettings | None` (the lead widens it).
def mapping(**settings: Any) -> Any:
    return settings


def openai(provider: FakeProvider) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test")


async def test_agent_settings_mapping_reaches_openai(provider: FakeProvider) -> None:
    provider.queue(Canned(body=OK_OPENAI))
    async with openai(provider) as model:
        result = await Agent(model=model, settings=mapping(temperature=0, stop=["END"])).run("Hi")
    assert result.output == "ok"
    body = provider.requests[0].body
    assert body["temperature"] == 0
    assert body["stop"] == ["END"]


async def test_agent_settings_mapping_reaches_anthropic(provider: FakeProvider) -> None:
    provider.queue(Canned(body=OK_ANTHROPIC))
    async with AnthropicModel("claude-test", base_url=provider.url, api_key="sk-ant") as model:
        result = await Agent(model=model, settings=mapping(temperature=0, max_tokens=7)).run("Hi")
    assert result.output == "ok"
    assert provider.requests[0].body["temperature"] == 0
    assert provider.requests[0].body["max_tokens"] == 7


async def test_agent_settings_mapping_reaches_test_models() -> None:
    model = TestModel()
    await Agent(model=model, settings=mapping(temperature=0)).run("Hi")
    assert model.requests[0].settings == ModelSettings(temperature=0)


async def test_model_default_and_request_settings_as_mappings(provider: FakeProvider) -> None:
    provider.queue(Canned(body=OK_OPENAI))
    m = OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test", settings={"temperature": 0.5})
    async with m:
        await m.request([UserMessage(content="Hi")], [], {"max_tokens": 3})  # type: ignore[arg-type]
    body = provider.requests[0].body
    assert (body["temperature"], body["max_tokens"]) == (0.5, 3)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"temprature": 0}, "Unknown model setting 'temprature'. Known settings: temperature, max_tokens"),
        ({1: 0}, "Unknown model setting 1."),
        (42, "must be a ModelSettings or a mapping such as {'temperature': 0}, got int."),
        ("temperature=0", "got str."),
        ({"temperature": "hot"}, "ModelSettings.temperature must be a number, got str 'hot'."),
        ({"max_tokens": 1.5}, "ModelSettings.max_tokens must be a whole number, got float 1.5."),
        ({"tool_choice": "any"}, "ModelSettings.tool_choice must be 'auto', 'required' or 'none', got str 'any'."),
        ({"stop": "END"}, "ModelSettings.stop takes a tuple of strings"),
        ({"stop": [1]}, "ModelSettings.stop must be a tuple of strings"),
        ({"extra_headers": {"X-A": 1}}, "extra_headers takes string values"),
        ({"parallel_tool_calls": "yes"}, "ModelSettings.parallel_tool_calls must be True or False"),
    ],
)
def test_bad_settings_fail_when_the_agent_is_made(settings: Any, message: str) -> None:
    with pytest.raises(UserError) as info:
        Agent(model=TestModel(), settings=settings)
    assert message in info.value.message


@pytest.mark.parametrize("make", [OpenAIModel, AnthropicModel])
def test_bad_settings_fail_when_a_model_is_made(make: Any) -> None:
    with pytest.raises(UserError, match="Unknown model setting 'temp'"):
        make("m", api_key="k", settings={"temp": 0})


def test_coerce() -> None:
    given = ModelSettings(seed=3)
    assert ModelSettings.coerce(given) is given
    assert ModelSettings.coerce(None) is None
    assert ModelSettings.coerce({"stop": ["a", "b"], "seed": 1}) == ModelSettings(stop=("a", "b"), seed=1)
    assert ModelSettings(temperature=1).merge({"top_p": 0.5}) == ModelSettings(temperature=1, top_p=0.5)
