"""What the SDK-backed provider adapters share: the per-loop client, retried requests and streams.

A subclass builds the request (`_kwargs`), sends it (`_create`), reads the answer (`_response`),
turns one streamed request into events (`_stream_events`) and maps SDK errors (`_error`).
"""

from __future__ import annotations

import contextlib
import importlib
from abc import abstractmethod
from collections.abc import AsyncGenerator, Sequence
from types import ModuleType
from typing import Any

from .._errors import OptionalDependencyError, ToolplanError, UnexpectedModelBehavior, UserError
from ..tools import ToolDefinition
from ._clients import LoopClients
from ._guard import check_model_requests_allowed
from ._messages import ModelMessage, ModelResponse, ModelStreamEvent
from ._model import Model
from ._retry import Endpoint, retry_call, retry_stream
from ._settings import ModelSettings, ModelSettingsLike, RetryConfig

__all__ = ("SDKModel", "import_sdk")


def import_sdk(package: str, feature: str) -> ModuleType:
    """Import a provider's SDK (the extra of the same name installs it)."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise OptionalDependencyError(feature, extra=package, package=package) from None


class SDKModel(Model):
    """A `Model` served through a provider's async SDK client, with toolplan's own retries."""

    _sdk: ModuleType
    _name: str
    _api_key: str | None
    _base_url: str | None
    _given_client: bool
    _clients: LoopClients[Any]
    _endpoint: Endpoint
    _api: str
    """What the base URL should point to, for the message about an unreadable answer."""
    settings: ModelSettings
    retry: RetryConfig

    def _setup(
        self,
        sdk: ModuleType,
        name: str,
        example: str,
        *,
        api_key: str | None,
        base_url: str | None,
        settings: ModelSettingsLike | None,
        retry: RetryConfig | None,
        client: Any,
        label: str,
        api: str,
    ) -> None:
        """Set the fields every adapter has (call first in ``__init__``); ``example`` is a model name."""
        self._sdk = sdk
        if not name:
            cls = type(self).__name__
            raise UserError(f"{cls} needs a model name, e.g. {cls}({example!r}).")
        self._name = name
        self._api_key = api_key
        self._base_url = base_url
        self.settings = ModelSettings.coerce(settings) or ModelSettings()
        self.retry = retry or RetryConfig()
        self._clients = LoopClients(client, self._new_client)
        self._endpoint = Endpoint(provider=label)
        self._api = api
        self._given_client = client is not None

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def _label(self) -> str:
        return self._endpoint.provider

    def _client(self) -> Any:
        client = self._clients.get()
        self._endpoint.url = str(client.base_url).rstrip("/")  # what the SDK really uses (its *_BASE_URL too)
        return client

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (a given ``client`` is left open)."""
        await self._clients.aclose()

    async def request(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send one request (retried on transient failures). See `Model.request`."""
        check_model_requests_allowed(repr(self))
        kwargs = self._kwargs(messages, tools, self.settings.merge(settings), stream=False)
        client = self._client()

        async def once() -> Any:
            try:
                return await self._create(client, kwargs)
            except Exception as exc:
                error = self._sdk_error(exc)
                if error is exc:
                    raise
                raise error from exc

        answer = await retry_call(once, self.retry, model=self._name, endpoint=self._endpoint)
        try:
            return self._response(answer)
        except (AttributeError, TypeError, ValueError) as exc:
            raise UnexpectedModelBehavior(
                f"{self._label} sent a response for model {self._name!r} that toolplan cannot read "
                f"({exc!r}). Check that the base URL points to {self._api}."
            ) from exc

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        """Stream one request (retried while nothing was yielded). See `Model.stream`."""
        check_model_requests_allowed(repr(self))
        kwargs = self._kwargs(messages, tools, self.settings.merge(settings), stream=True)
        client = self._client()

        async def events() -> AsyncGenerator[ModelStreamEvent, None]:
            try:
                async with contextlib.aclosing(self._stream_events(client, kwargs)) as stream:
                    async for event in stream:
                        yield event
            except Exception as exc:
                error = self._sdk_error(exc)
                if error is exc:
                    raise
                raise error from exc

        async with contextlib.aclosing(
            retry_stream(events, self.retry, model=self._name, endpoint=self._endpoint)
        ) as stream:
            async for event in stream:
                yield event

    def _sdk_error(self, exc: Exception) -> Exception:
        """The error to raise for one that came out of the SDK (``exc`` itself when it is not the SDK's)."""
        if isinstance(exc, self._sdk.APIError):
            return self._error(exc)
        if isinstance(exc, TypeError):
            return self._credentials_error(exc)
        return exc

    def _credentials_error(self, exc: TypeError) -> Exception:
        """A `TypeError` from the SDK at request time; ``exc`` itself unless it means missing credentials."""
        return exc

    @abstractmethod
    def _new_client(self) -> Any:
        """A new SDK client with its own retries off."""

    @abstractmethod
    def _kwargs(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition], s: ModelSettings, *, stream: bool
    ) -> dict[str, Any]: ...

    @abstractmethod
    async def _create(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """Send one non-streamed request."""

    @abstractmethod
    def _response(self, answer: Any) -> ModelResponse: ...

    @abstractmethod
    def _stream_events(self, client: Any, kwargs: dict[str, Any]) -> AsyncGenerator[ModelStreamEvent, None]:
        """Send one streamed request and yield its events, ending with `ResponseCompleted`."""

    @abstractmethod
    def _error(self, exc: Exception) -> ToolplanError: ...
