"""How model requests are retried: the provider's Retry-After, servers that are down, the log lines.

Real SDKs talk to a real HTTP server on 127.0.0.1; the waits are recorded, not slept (`retry_waits`).
"""

from __future__ import annotations

import email.utils
import logging
import socket
import time
from typing import Any

import pytest

from toolplan import ModelConnectionError, ModelHTTPError
from toolplan.models import AnthropicModel, ModelMessage, OpenAIModel, RetryConfig, UserMessage
from toolplan.testing import Canned, FakeProvider, openai_sse

ASK: list[ModelMessage] = [UserMessage(content="Hi")]
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
NO_JITTER = RetryConfig(wait_initial=0.5, wait_jitter=0)


def rate_limited(**headers: str) -> Canned:
    return Canned(status=429, body={"error": {"message": "slow down"}}, headers=headers)


def openai(provider: FakeProvider, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test", **kwargs)


def anthropic(provider: FakeProvider, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=provider.url, api_key="sk-ant-test", **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "toolplan.models"]


# -- Retry-After -------------------------------------------------------------------------------


async def test_retry_after_seconds_is_the_wait(
    provider: FakeProvider, retry_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    provider.queue(rate_limited(**{"Retry-After": "2"}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=NO_JITTER) as m:
        assert (await m.request(ASK, [])).message.content == "ok"
    assert retry_waits == [2.0]
    assert len(provider.requests) == 2
    assert retry_lines(caplog) == [
        f"The OpenAI-compatible server at {provider.url}/v1, model 'gpt-test': HTTP 429, asked to wait 2 s. "
        "Attempt 1 of 5 failed; next in 2 s."
    ]


async def test_retry_after_ms_wins_over_retry_after(provider: FakeProvider, retry_waits: list[float]) -> None:
    provider.queue(rate_limited(**{"retry-after-ms": "1500", "retry-after": "9"}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=NO_JITTER) as m:
        await m.request(ASK, [])
    assert retry_waits == [1.5]


async def test_retry_after_http_date(provider: FakeProvider, retry_waits: list[float]) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    provider.queue(rate_limited(**{"Retry-After": when}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=NO_JITTER) as m:
        await m.request(ASK, [])
    assert len(retry_waits) == 1
    assert 27 <= retry_waits[0] <= 31  # whole seconds on the wire, and the clock moves on


@pytest.mark.parametrize("value", ["soon", "-3", "nan", "1" * 100])
async def test_unreadable_retry_after_falls_back_to_backoff(
    provider: FakeProvider, retry_waits: list[float], value: str
) -> None:
    provider.queue(rate_limited(**{"Retry-After": value}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=NO_JITTER) as m:
        await m.request(ASK, [])
    assert retry_waits == [0.5]


async def test_retry_after_past_the_deadline_fails_at_once(provider: FakeProvider, retry_waits: list[float]) -> None:
    provider.queue(rate_limited(**{"Retry-After": "30"}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=RetryConfig(deadline=10)) as m:
        with pytest.raises(ModelHTTPError) as info:
            await m.request(ASK, [])
    assert info.value.status_code == 429
    assert "slow down" in info.value.message
    assert "The provider asked to wait 30 s before retrying, which would pass the retry deadline of 10 s" in (
        info.value.message
    )
    assert "RetryConfig.deadline" in info.value.message
    assert retry_waits == []
    assert len(provider.requests) == 1


async def test_absurd_retry_after_without_deadline_fails_at_once(
    provider: FakeProvider, retry_waits: list[float]
) -> None:
    provider.queue(rate_limited(**{"Retry-After": "86400"}), Canned(body=OK_OPENAI))
    async with openai(provider, retry=RetryConfig(deadline=None)) as m:
        with pytest.raises(ModelHTTPError, match="asked to wait 86400 s"):
            await m.request(ASK, [])
    assert retry_waits == []


async def test_huge_retry_after_stays_readable(provider: FakeProvider, retry_waits: list[float]) -> None:
    provider.queue(rate_limited(**{"Retry-After": "1e308"}))
    async with openai(provider) as m:
        with pytest.raises(ModelHTTPError, match=r"asked to wait 1e\+308 s before retrying, which would pass"):
            await m.request(ASK, [])
    assert retry_waits == []


async def test_backoff_that_would_pass_the_deadline_is_not_waited(
    provider: FakeProvider, retry_waits: list[float]
) -> None:
    provider.queue(*[Canned(status=503, body={"error": {"message": "busy"}})] * 3)
    config = RetryConfig(attempts=3, wait_initial=4, wait_jitter=0, deadline=5)
    async with openai(provider, retry=config) as m:
        with pytest.raises(ModelHTTPError, match=r"busy.*next retry would start after 8 s more.*deadline of 5 s"):
            await m.request(ASK, [])
    assert retry_waits == [4.0]
    assert len(provider.requests) == 2


async def test_anthropic_retry_after(provider: FakeProvider, retry_waits: list[float]) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    provider.queue(
        Canned(status=529, body=overloaded, headers={"retry-after": "3"}),
        Canned(status=429, body=overloaded, headers={"retry-after-ms": "250"}),
        Canned(body=OK_ANTHROPIC),
    )
    async with anthropic(provider, retry=NO_JITTER) as m:
        assert (await m.request(ASK, [])).message.content == "ok"
    assert retry_waits == [3.0, 0.25]


async def test_retry_after_is_honoured_for_streams(provider: FakeProvider, retry_waits: list[float]) -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
    }
    provider.queue(rate_limited(**{"Retry-After": "1"}), Canned(sse=openai_sse([chunk])))
    async with openai(provider, retry=NO_JITTER) as m:
        events = [e async for e in m.stream(ASK, [])]
    assert len(events) == 2
    assert retry_waits == [1.0]


# -- servers that are down ---------------------------------------------------------------------


async def test_refused_first_connection_fails_fast_naming_the_url(
    retry_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with OpenAIModel("llama3", base_url=url, provider="ollama") as m:  # the default RetryConfig
        with pytest.raises(ModelConnectionError) as info:
            await m.request(ASK, [])
    assert info.value.message.startswith(
        f"Could not connect to Ollama at {url} for model 'llama3': connection refused, nothing is listening there."
    )
    assert info.value.message.endswith("Start the server, or fix the URL (OLLAMA_BASE_URL).")
    assert retry_waits == [0.25, 0.5]
    assert retry_lines(caplog) == [
        f"Ollama at {url}, model 'llama3': connection refused. Attempt 1 of 3 failed; next in 0.25 s.",
        f"Ollama at {url}, model 'llama3': connection refused. Attempt 2 of 3 failed; next in 0.5 s.",
    ]


async def test_refused_after_the_server_answered_gets_the_whole_policy(retry_waits: list[float]) -> None:
    config = RetryConfig(attempts=4, wait_initial=1, wait_jitter=0)
    with FakeProvider() as server:
        server.queue(Canned(body=OK_OPENAI))
        m = openai(server, retry=config)
        await m.request(ASK, [])
    async with m:  # the server went away after answering: maybe restarting, so the usual retries
        with pytest.raises(ModelConnectionError, match="connection refused"):
            await m.request(ASK, [])
    assert retry_waits == [1.0, 2.0, 4.0]


async def test_openai_base_url_from_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with OpenAIModel("gpt-test", retry=RetryConfig.no_retries()) as m:
        with pytest.raises(ModelConnectionError) as info:
            await m.request(ASK, [])
    assert f"at {url} for model 'gpt-test'" in info.value.message
    assert "api.openai.com" not in info.value.message


async def test_openai_base_url_without_a_key_needs_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeProvider() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        server.queue(Canned(body=OK_OPENAI))
        async with OpenAIModel("local-model") as m:  # a local server (vLLM, llama.cpp) wants no key
            assert (await m.request(ASK, [])).message.content == "ok"


async def test_anthropic_base_url_from_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    async with AnthropicModel("claude-test", api_key="sk-ant", retry=RetryConfig.no_retries()) as m:
        with pytest.raises(ModelConnectionError) as info:
            await m.request(ASK, [])
    assert f"Could not connect to Anthropic at {url} for model 'claude-test'" in info.value.message
    assert "api.anthropic.com" not in info.value.message


# -- log lines ---------------------------------------------------------------------------------


async def test_each_retry_is_one_readable_line_and_stamina_stays_quiet(
    provider: FakeProvider, retry_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider.queue(*[Canned(status=503, body={"error": {"message": "busy"}})] * 2, Canned(body=OK_OPENAI))
    async with anthropic_or_openai(provider) as m:
        await m.request(ASK, [])
    where = f"The OpenAI-compatible server at {provider.url}/v1, model 'gpt-test'"
    assert retry_lines(caplog) == [
        f"{where}: HTTP 503. Attempt 1 of 3 failed; next in 0.5 s.",
        f"{where}: HTTP 503. Attempt 2 of 3 failed; next in 1 s.",
    ]
    assert [r for r in caplog.records if r.name == "stamina"] == []
    assert retry_waits == [0.5, 1.0]


def anthropic_or_openai(provider: FakeProvider) -> OpenAIModel:
    return openai(provider, retry=RetryConfig(attempts=3, wait_initial=0.5, wait_jitter=0))


def test_stamina_still_logs_retries_that_are_not_toolplan_s(caplog: pytest.LogCaptureFixture) -> None:
    import stamina

    caplog.set_level(logging.WARNING)
    with stamina.set_testing(True, attempts=2):
        for attempt in stamina.retry_context(on=ValueError):
            with attempt:
                if attempt.num == 1:
                    raise ValueError("once")
    assert [r.getMessage() for r in caplog.records if r.name == "stamina"] == ["stamina.retry_scheduled"]
