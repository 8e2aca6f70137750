"""Conformance, cogent's executors: ``NativeExecutor`` / ``SequentialExecutor`` over an agent, and ``agent.arun``.

A cogent user writes ``NativeExecutor(agent, max_tool_calls_per_turn=50, max_concurrent_tools=20,
resilience=True)`` and ``await executor.execute(task)``, or ``SequentialExecutor(agent)``, and expects
a turn's calls to run at once (or one at a time) and a rate-limited model request to be retried.
Here the model is a real OpenAI-compatible HTTP server on 127.0.0.1 whose first answer is HTTP 429.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from toolplan import Agent, NativeExecutor, SequentialExecutor, tool
from toolplan.models import OpenAIModel
from toolplan.testing import Canned, FakeProvider, disable_retry_backoff


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as server, disable_retry_backoff():
        yield server


def completion(message: dict[str, Any], finish: str) -> Canned:
    return Canned(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


def turn(*cities: str) -> list[Canned]:
    """HTTP 429, then one turn calling ``weather`` for each city, then the answer."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": c})}}
        for i, c in enumerate(cities)
    ]
    return [
        Canned(status=429, body={"error": {"message": "slow down"}}),
        completion({"content": None, "tool_calls": calls}, "tool_calls"),
        completion({"content": "Both are mild."}, "stop"),
    ]


def weather_tool(together: int = 1) -> tuple[Any, list[str], list[int]]:
    """``weather``, recording the order calls end in and the most running at once.

    Each call ends only once ``together`` calls have started (it never ends if they never run at once).
    """
    ended: list[str] = []
    peak = [0]
    running = 0
    started = asyncio.Event()

    @tool
    async def weather(city: str) -> str:
        """The weather of a city."""
        nonlocal running
        running += 1
        peak[0] = max(peak[0], running)
        if running >= together:
            started.set()
        await started.wait()
        running -= 1
        ended.append(city)
        return f"{city}: mild"

    return weather, ended, peak


def agent_on(provider: FakeProvider, weather: Any) -> Agent[None, str]:
    model = OpenAIModel("gpt-test", base_url=f"{provider.url}/v1", api_key="sk-test")
    return Agent(model, tools=[weather])


async def test_native_executor_runs_a_turn_at_once_and_retries_a_rate_limit(provider: FakeProvider) -> None:
    provider.queue(*turn("Oslo", "Rome"))
    weather, ended, peak = weather_tool(together=2)
    executor = NativeExecutor(
        agent_on(provider, weather), max_tool_calls_per_turn=50, max_concurrent_tools=20, resilience=True
    )
    assert await executor.execute("Weather in Oslo and Rome?") == "Both are mild."
    assert len(provider.requests) == 3  # the 429, retried, then the turn after the tool calls
    assert peak == [2] and sorted(ended) == ["Oslo", "Rome"]


async def test_sequential_executor_runs_a_turn_in_order(provider: FakeProvider) -> None:
    provider.queue(*turn("Oslo", "Rome"))
    weather, ended, peak = weather_tool()
    assert (
        await SequentialExecutor(agent_on(provider, weather)).execute("Weather in Oslo and Rome?") == "Both are mild."
    )
    assert ended == ["Oslo", "Rome"] and peak == [1]


async def test_arun_is_the_agent_run(provider: FakeProvider) -> None:
    provider.queue(*turn("Oslo"))
    weather, ended, _ = weather_tool()
    result = await agent_on(provider, weather).arun("Weather in Oslo?")
    assert result.output == "Both are mild." and ended == ["Oslo"]
