"""End to end against a real model: SmolLM2-135M behind llama.cpp's OpenAI-compatible server.

The model is tiny: these tests check the wire protocol (a streamed tool call reaches the adapter,
usage is counted, a tool result goes back and the model answers), not what it says.
"""

from __future__ import annotations

import pytest

from toolplan import tool
from toolplan.models import (
    ModelMessage,
    ModelSettings,
    ResponseCompleted,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolReturnMessage,
    UserMessage,
)
from toolplan.testing import LocalLlamaServer

pytestmark = pytest.mark.local_model


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return "sunny"


ASK: list[ModelMessage] = [UserMessage(content="What is the weather in Paris?")]
# llama.cpp's chatml-function-calling format ignores tools unless tool_choice is sent; naming the
# function makes it constrain the arguments to the tool's JSON Schema (and keeps the test fast).
CALL_WEATHER = ModelSettings(
    max_tokens=48, extra_body={"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
)


async def test_streamed_tool_call_reaches_the_adapter(llama_server: LocalLlamaServer) -> None:
    async with llama_server.model() as model:
        events = [event async for event in model.stream(ASK, [get_weather.definition], CALL_WEATHER)]

    started = [e for e in events if isinstance(e, ToolCallStarted)]
    deltas = [e for e in events if isinstance(e, ToolCallArgsDelta)]
    assert [e.name for e in started] == ["get_weather"]
    assert len(deltas) > 1  # the arguments arrived in pieces
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    [call] = final.response.message.tool_calls
    assert call.id == started[0].id
    assert call.arguments == "".join(d.delta for d in deltas)
    assert isinstance(call.parse_arguments()["city"], str)
    assert final.response.finish_reason == "tool_calls"
    assert final.response.model_name == llama_server.model_name


async def test_usage_is_counted_and_a_tool_result_goes_back(llama_server: LocalLlamaServer) -> None:
    async with llama_server.model() as model:
        first = await model.request(ASK, [get_weather.definition], CALL_WEATHER)
        [call] = first.message.tool_calls
        assert call.name == "get_weather"
        assert first.usage.requests == 1
        assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0

        history: list[ModelMessage] = [
            *ASK,
            first.message,
            ToolReturnMessage(tool_call_id=call.id, name=call.name, content='"sunny, 21 degrees"'),
        ]
        events = [event async for event in model.stream(history, [], ModelSettings(max_tokens=16))]

    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert text and final.response.message.content == text
    assert final.response.message.tool_calls == ()
    assert final.response.finish_reason in ("stop", "length")


def test_server_process_group_is_gone_after_the_block() -> None:
    import importlib.util
    import os

    from toolplan.testing import local_llama_server

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama-cpp-python is not installed: pip install "toolplan[local]"')
    with local_llama_server() as server:
        os.killpg(server.pid, 0)  # alive: no error
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)
