"""Cached input tokens as the real SDKs read them from a local server, prices, and the spend meter."""

from __future__ import annotations

from typing import Any

import pytest

from toolplan import ModelPrice, SpendLimits, UsageLimitExceeded, UserError
from toolplan.models import (
    AnthropicModel,
    ModelMessage,
    OpenAIModel,
    ResponseCompleted,
    SystemMessage,
    Usage,
    UserMessage,
)
from toolplan.models._internal import SpendMeter
from toolplan.testing import Canned, FakeProvider, TestModel, anthropic_sse, openai_sse

ASK: list[ModelMessage] = [SystemMessage(content="Be brief."), UserMessage(content="Weather in Tokyo?")]


def openai_completion(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Sunny."}, "finish_reason": "stop"}],
        "usage": usage,
    }


OPENAI_USAGE = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920},
}


async def test_openai_reports_cached_input_tokens(provider: FakeProvider) -> None:
    provider.queue(Canned(body=openai_completion(OPENAI_USAGE)))
    async with OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test") as m:
        response = await m.request(ASK, [])
    assert response.usage == Usage(requests=1, input_tokens=2006, output_tokens=300, cached_input_tokens=1920)


async def test_openai_stream_reports_cached_input_tokens(provider: FakeProvider) -> None:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    provider.queue(
        Canned(
            sse=openai_sse(
                [
                    {**base, "choices": [{"index": 0, "delta": {"content": "Sunny."}, "finish_reason": "stop"}]},
                    {**base, "choices": [], "usage": OPENAI_USAGE},
                ]
            )
        )
    )
    async with OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test") as m:
        events = [e async for e in m.stream(ASK, [])]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.usage.cached_input_tokens == 1920
    assert final.response.usage.input_tokens == 2006


async def test_openai_without_details_reports_no_cached_tokens(provider: FakeProvider) -> None:
    provider.queue(Canned(body=openai_completion({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11})))
    async with OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test") as m:
        response = await m.request(ASK, [])
    assert response.usage == Usage(requests=1, input_tokens=9, output_tokens=2)


ANTHROPIC_USAGE = {
    "input_tokens": 50,
    "cache_creation_input_tokens": 1000,
    "cache_read_input_tokens": 3000,
    "output_tokens": 70,
}


def anthropic_message(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


async def test_anthropic_reports_cache_reads_and_writes(provider: FakeProvider) -> None:
    provider.queue(Canned(body=anthropic_message(ANTHROPIC_USAGE)))
    async with AnthropicModel("claude-test", base_url=provider.url, api_key="sk-ant-test") as m:
        response = await m.request(ASK, [])
    # input_tokens counts every token read: fresh, written to the cache, and read from it
    assert response.usage == Usage(
        requests=1, input_tokens=4050, output_tokens=70, cached_input_tokens=3000, cache_write_tokens=1000
    )


async def test_anthropic_stream_reports_cache_reads_and_writes(provider: FakeProvider) -> None:
    start = {**anthropic_message({**ANTHROPIC_USAGE, "output_tokens": 1}), "content": [], "stop_reason": None}
    provider.queue(
        Canned(
            sse=anthropic_sse(
                [
                    {"type": "message_start", "message": start},
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sunny."}},
                    {"type": "content_block_stop", "index": 0},
                    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 70}},
                    {"type": "message_stop"},
                ]
            )
        )
    )
    async with AnthropicModel("claude-test", base_url=provider.url, api_key="sk-ant-test") as m:
        events = [e async for e in m.stream(ASK, [])]
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response.usage == Usage(
        requests=1, input_tokens=4050, output_tokens=70, cached_input_tokens=3000, cache_write_tokens=1000
    )


def test_price_counts_cached_and_written_tokens_at_their_rates() -> None:
    price = ModelPrice(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    usage = Usage(requests=1, input_tokens=4050, output_tokens=70, cached_input_tokens=3000, cache_write_tokens=1000)
    assert price.cost(usage) == pytest.approx((50 * 3.0 + 3000 * 0.3 + 1000 * 3.75 + 70 * 15.0) / 1e6)
    # without cache rates, cached tokens cost the input rate
    assert ModelPrice(input=1.0, output=2.0).cost(usage) == pytest.approx((4050 * 1.0 + 70 * 2.0) / 1e6)


def test_usage_adds_every_kind() -> None:
    a = Usage(requests=1, input_tokens=10, output_tokens=2, cached_input_tokens=4, cache_write_tokens=1)
    assert (a + a).to_dict() == {
        "requests": 2,
        "input_tokens": 20,
        "output_tokens": 4,
        "total_tokens": 24,
        "cached_input_tokens": 8,
        "cache_write_tokens": 2,
    }


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ModelPrice(input=-1, output=1), "ModelPrice.input"),
        (lambda: ModelPrice(input=1, output=float("nan")), "ModelPrice.output"),
        (lambda: SpendLimits(max_total_tokens=-5), "SpendLimits.max_total_tokens"),
        (lambda: SpendLimits(max_input_tokens=True), "SpendLimits.max_input_tokens"),
        (lambda: SpendLimits(max_money=float("inf")), "SpendLimits.max_money"),
        (lambda: SpendLimits(prices={"m": (1, 2)}), "ModelPrice(input=..., output=...)"),  # type: ignore[dict-item]
    ],
)
def test_bad_limits_and_prices_are_user_errors(make: Any, says: str) -> None:
    with pytest.raises(UserError, match=says.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        make()


def test_money_cap_without_a_price_for_the_model_is_a_user_error() -> None:
    spend = SpendLimits(max_money=1.0, prices={"gpt-4o": ModelPrice(input=2.5, output=10)})
    with pytest.raises(UserError, match=r"no price for model 'test'.*Prices given for: gpt-4o"):
        SpendMeter(spend, TestModel())
    # by name, or by provider:name
    assert SpendMeter(SpendLimits(max_money=1.0, prices={"test:test": ModelPrice(input=1, output=1)}), TestModel())


async def test_meter_counts_the_known_prefix_as_the_provider_did() -> None:
    meter = SpendMeter(SpendLimits(max_input_tokens=1000), TestModel())
    first: list[ModelMessage] = [UserMessage(content="one two three")]
    assert meter.estimate(first) == 3
    await meter.before(first)
    await meter.after(first, Usage(requests=1, input_tokens=400, output_tokens=5))
    # the next request: the 400 the provider counted, and four words more
    assert meter.estimate([*first, UserMessage(content="four five six seven")]) == 404


async def test_meter_refuses_a_request_whose_input_passes_the_cap() -> None:
    meter = SpendMeter(SpendLimits(max_input_tokens=5), TestModel())
    with pytest.raises(UsageLimitExceeded, match="at least 6 input tokens") as caught:
        await meter.before([UserMessage(content="one two three four five six")])
    assert caught.value.limit == "max_input_tokens"
    assert caught.value.usage == Usage()
