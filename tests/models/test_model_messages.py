from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

import toolplan.models
import toolplan.testing
from toolplan import ModelAuthError, ModelConnectionError, ModelHTTPError, ToolError, UserError
from toolplan.models import (
    AnthropicModel,
    AssistantMessage,
    ModelResponse,
    ModelSettings,
    OpenAIModel,
    ResponseCompleted,
    RetryConfig,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolMessage,
    ToolReturnMessage,
    Usage,
    infer_model,
    is_transient,
)
from toolplan.models._messages import approximate_tokens
from toolplan.models._streaming import StreamBuilder, response_events
from toolplan.testing import TestModel


@pytest.mark.parametrize("module", [toolplan.models, toolplan.testing])
def test_all_is_a_sorted_tuple_of_importable_names(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert isinstance(names, tuple)
    assert list(names) == sorted(names)
    for name in names:
        assert getattr(module, name) is not None


def test_importing_toolplan_models_imports_no_sdk() -> None:
    code = textwrap.dedent(
        """
        import sys
        import toolplan, toolplan.models, toolplan.testing
        loaded = sorted(m for m in ("openai", "anthropic", "stamina", "llama_cpp") if m in sys.modules)
        print(",".join(loaded))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_missing_sdk_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["openai"] = None
        sys.modules["anthropic"] = None
        from toolplan.models import OpenAIModel, AnthropicModel
        for cls in (OpenAIModel, AnthropicModel):
            try:
                cls("x")
            except ImportError as exc:
                print(type(exc).__name__, exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "OptionalDependencyError OpenAIModel needs an optional dependency (package 'openai')" in out
    assert 'pip install "toolplan[openai]"' in out
    assert 'pip install "toolplan[anthropic]"' in out


def test_parse_arguments() -> None:
    assert ToolCall(id="1", name="t", arguments='{"a": 1}').parse_arguments() == {"a": 1}
    assert ToolCall(id="1", name="t", arguments="  ").parse_arguments() == {}
    with pytest.raises(ToolError, match=r"not valid JSON .*Call the tool again") as info:
        ToolCall(id="1", name="t", arguments='{"a": ').parse_arguments()
    assert info.value.tool == "t"
    with pytest.raises(ToolError, match="must be a JSON object, got list"):
        ToolCall(id="1", name="t", arguments="[1]").parse_arguments()


def test_messages_are_frozen_tagged_and_keyword_only() -> None:
    message = AssistantMessage(content="hi", tool_calls=[ToolCall(id="1", name="t")])  # type: ignore[arg-type]
    assert isinstance(message.tool_calls, tuple)
    assert message.role == "assistant"
    assert ToolMessage is ToolReturnMessage
    assert ToolReturnMessage(tool_call_id="1", name="t", content="x").role == "tool"
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        TextDelta("positional")  # type: ignore[call-arg]
    assert hash(message) == hash(AssistantMessage(content="hi", tool_calls=(ToolCall(id="1", name="t"),)))


def test_usage_adds() -> None:
    total = Usage(requests=1, input_tokens=3, output_tokens=4) + Usage(requests=2, input_tokens=5, output_tokens=6)
    assert total == Usage(requests=3, input_tokens=8, output_tokens=10)
    assert total.total_tokens == 18
    assert sum([Usage(requests=1)] * 3, Usage()) == Usage(requests=3)


def test_approximate_tokens() -> None:
    assert approximate_tokens("Hello, world!") == 4
    assert approximate_tokens("") == 0


def test_settings_merge_and_validation() -> None:
    base = ModelSettings(temperature=0.2, max_tokens=10, extra_body={"a": 1, "b": 1})
    merged = base.merge(ModelSettings(max_tokens=20, extra_body={"b": 2}))
    assert merged == ModelSettings(temperature=0.2, max_tokens=20, extra_body={"a": 1, "b": 2})
    assert base.merge(None) is base
    with pytest.raises(UserError):
        ModelSettings(max_tokens=0)
    with pytest.raises(UserError, match="tuple of strings"):
        ModelSettings(stop="END")  # type: ignore[arg-type]


def test_retry_config_defaults_are_the_documented_ones() -> None:
    config = RetryConfig()
    assert (config.attempts, config.wait_initial, config.wait_max, config.wait_exp_base, config.deadline) == (
        5,
        1.0,
        16.0,
        2.0,
        120.0,
    )
    waits = [min(config.wait_max, config.wait_initial * config.wait_exp_base**n) for n in range(5)]
    assert waits == [1, 2, 4, 8, 16]
    assert RetryConfig.no_retries().attempts == 1
    with pytest.raises(UserError):
        RetryConfig(attempts=0)
    with pytest.raises(UserError):
        RetryConfig(deadline=0)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ModelHTTPError("x", status_code=429), True),
        (ModelHTTPError("x", status_code=503), True),
        (ModelHTTPError("x", status_code=408), True),
        (ModelHTTPError("x", status_code=400), False),
        (ModelHTTPError("x", status_code=422), False),
        (ModelAuthError("x", status_code=401), False),
        (ModelConnectionError("x"), True),
        (ValueError("x"), False),
    ],
)
def test_is_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_stream_builder_holds_arguments_until_the_name_arrives() -> None:
    builder = StreamBuilder(model_name="m")
    assert builder.tool_call(0, arguments='{"a"') == []
    assert builder.tool_call(0, id="c0", name="t") == [
        ToolCallStarted(index=0, id="c0", name="t"),
        ToolCallArgsDelta(index=0, id="c0", delta='{"a"'),
    ]
    assert builder.tool_call(0, arguments=": 1}") == [ToolCallArgsDelta(index=0, id="c0", delta=": 1}")]
    assert builder.text("") == []
    final = builder.complete()
    assert final.response.message.tool_calls == (ToolCall(id="c0", name="t", arguments='{"a": 1}'),)
    assert final.response.model_name == "m"


def test_response_events_round_trip() -> None:
    response = ModelResponse(
        message=AssistantMessage(content="abcdef", tool_calls=(ToolCall(id="1", name="t", arguments='{"x": 12}'),)),
        usage=Usage(requests=1, input_tokens=1, output_tokens=2),
    )
    events = list(response_events(response, chunk_size=4))
    builder = StreamBuilder()
    for event in events[:-1]:
        if isinstance(event, TextDelta):
            builder.text(event.text)
        elif isinstance(event, ToolCallStarted):
            builder.tool_call(event.index, id=event.id, name=event.name)
        elif isinstance(event, ToolCallArgsDelta):
            builder.tool_call(event.index, arguments=event.delta)
    assert builder.message() == response.message
    assert events[-1] == ResponseCompleted(response=response)


async def test_default_stream_replays_request() -> None:
    events = [e async for e in TestModel(custom_output_text="hi").stream([], [])]
    assert isinstance(events[-1], ResponseCompleted)


def test_infer_model() -> None:
    openai = infer_model("openai:gpt-4o-mini")
    assert isinstance(openai, OpenAIModel) and openai.name == "gpt-4o-mini" and openai.provider == "openai"
    claude = infer_model("anthropic:claude-sonnet-4-5")
    assert isinstance(claude, AnthropicModel) and claude.name == "claude-sonnet-4-5"
    ollama = infer_model("ollama:llama3.2")
    assert isinstance(ollama, OpenAIModel) and ollama.provider == "ollama"
    assert ollama._base_url == "http://localhost:11434/v1"
    model = TestModel()
    assert infer_model(model) is model
    with pytest.raises(UserError, match="write 'provider:name'"):
        infer_model("gpt-4o")
    with pytest.raises(UserError, match=r"Unknown model provider 'foo'.*OpenAIModel"):
        infer_model("foo:bar")
    assert repr(openai) == "OpenAIModel('gpt-4o-mini')"
