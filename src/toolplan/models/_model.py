"""The `Model` ABC and ``"provider:name"`` strings."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Self

from .._errors import UserError
from ..tools import ToolDefinition
from ._messages import ModelMessage, ModelResponse, ModelStreamEvent
from ._settings import ModelSettings
from ._streaming import response_events

__all__ = ("KNOWN_PROVIDERS", "OLLAMA_BASE_URL", "Model", "infer_model")

OLLAMA_BASE_URL = "http://localhost:11434/v1"
KNOWN_PROVIDERS = ("anthropic", "ollama", "openai")


class Model(ABC):
    """A chat model that can call tools.

    toolplan owns this interface and calls it; implement it to plug in another provider. Requests
    take provider-neutral messages and tool definitions and return a `ModelResponse`; `stream`
    yields `ModelStreamEvent`s and always ends with `ResponseCompleted`.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """The model's name, e.g. ``"gpt-4o-mini"``."""

    @property
    def provider(self) -> str:
        """Who serves the model, e.g. ``"openai"``; used in messages and traces."""
        return type(self).__name__

    @abstractmethod
    async def request(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send the conversation and the available tools; return the model's complete answer.

        Args:
            messages: The conversation so far, oldest first.
            tools: The tools the model may call.
            settings: Overrides of the model's default settings for this request.

        Raises:
            ModelHTTPError: The provider answered with an error status (after retries).
            ModelAuthError: The provider rejected the credentials (never retried).
            ModelConnectionError: The provider could not be reached or timed out (after retries).
        """

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        """Like `request`, but yield the answer as it arrives, ending with `ResponseCompleted`.

        Close the iterator (``aclose()``, or leave an ``async with contextlib.aclosing(...)`` block)
        to stop early; the connection is released. This default implementation makes one request
        and replays its answer.
        """
        response = await self.request(messages, tools, settings)
        for event in response_events(response):
            yield event

    def check_credentials(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Raise `UserError` if requests cannot work for want of credentials (an API key), without I/O.

        Requests raise the same error on first use; call this to fail before doing anything else
        (the CLI does, before its demo runs). Models without credentials do nothing.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections the model holds (a no-op for models that hold none)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def infer_model(model: Model | str) -> Model:
    """A `Model` from a ``"provider:name"`` string (a `Model` is returned as is).

    Known providers:

    - ``openai:gpt-4o-mini`` — OpenAI (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` is honoured).
    - ``anthropic:claude-sonnet-4-5`` — Anthropic (``ANTHROPIC_API_KEY``).
    - ``ollama:llama3.2`` — Ollama's OpenAI-compatible API at ``OLLAMA_BASE_URL`` or
      ``http://localhost:11434/v1``.

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
        from ._openai import OpenAIModel

        return OpenAIModel(name)
    if provider == "anthropic":
        from ._anthropic import AnthropicModel

        return AnthropicModel(name)
    if provider == "ollama":
        from ._openai import OpenAIModel

        base_url = os.environ.get("OLLAMA_BASE_URL", OLLAMA_BASE_URL)
        return OpenAIModel(name, base_url=base_url, api_key="ollama", provider="ollama")
    raise UserError(
        f"Unknown model provider {provider!r} in {model!r}. Known providers: {', '.join(KNOWN_PROVIDERS)}; "
        "for another OpenAI-compatible server use OpenAIModel(name, base_url=..., api_key=...)."
    )
