"""The `Model` ABC: the interface toolplan calls for every model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Self

from ..tools import ToolDefinition
from ._messages import ModelMessage, ModelResponse, ModelStreamEvent
from ._settings import ModelSettings
from ._streaming import response_events

__all__ = ("Model",)


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
