"""``"provider:name"`` strings and the credentials check that runs before anything else (the CLI demo)."""

from __future__ import annotations

import pytest

from toolplan import UserError
from toolplan.cli._agent_demo import real_demo_model
from toolplan.models import AnthropicModel, OpenAIModel, infer_model
from toolplan.testing import TestModel, forbid_model_requests


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def test_unknown_provider_is_reported_by_name() -> None:
    with pytest.raises(UserError, match=r"Unknown model provider 'foo' in 'foo:bar'\. Known providers: anthropic"):
        real_demo_model("foo:bar")


@pytest.mark.parametrize(
    ("spec", "variable"), [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:c", "ANTHROPIC_API_KEY")]
)
def test_missing_key_is_reported_before_any_request(spec: str, variable: str) -> None:
    with forbid_model_requests(), pytest.raises(UserError, match=f"has no API key. Set the {variable} environment"):
        real_demo_model(spec)


def test_keys_from_arguments_and_environment_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    OpenAIModel("gpt-4o-mini", api_key="sk").check_credentials()
    AnthropicModel("c", api_key="sk").check_credentials()
    real_demo_model("ollama:llama3")  # a local server: no key needed
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    real_demo_model("openai:local")  # neither for another OpenAI-compatible server
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk")
    assert isinstance(real_demo_model("openai:gpt-4o-mini"), OpenAIModel)
    assert isinstance(real_demo_model("anthropic:c"), AnthropicModel)


def test_models_without_credentials_pass_the_check() -> None:
    model = TestModel()
    model.check_credentials()
    assert infer_model(model) is model
