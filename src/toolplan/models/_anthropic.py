"""Anthropic's messages API: ``tool_use`` / ``tool_result`` blocks, streamed ``input_json_delta``.

The ``anthropic`` SDK is imported when a model is created, not when this module is.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._errors import ToolplanError, UserError
from ..tools import ToolDefinition
from ._messages import (
    AssistantMessage,
    FinishReason,
    ModelMessage,
    ModelResponse,
    ModelStreamEvent,
    SystemMessage,
    ToolCall,
    ToolReturnMessage,
    Usage,
    UserMessage,
    tool_call_arguments_object,
)
from ._retry import connection_error, error_detail, status_error
from ._sdk import SDKModel, import_sdk
from ._settings import ForceTool, ModelSettings, ModelSettingsLike, RetryConfig, check_forced_tool
from ._streaming import StreamBuilder

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ("DEFAULT_MAX_TOKENS", "AnthropicModel")

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; this is sent when `ModelSettings.max_tokens` is not set."""

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
# Error types Anthropic sends inside a stream (the HTTP status was already 200).
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicModel(SDKModel):
    """A Claude model behind Anthropic's messages API.

    Args:
        name: The model's name, e.g. ``"claude-sonnet-4-5"``.
        api_key: The key; None reads ``ANTHROPIC_API_KEY``.
        base_url: Another endpoint (a proxy, a test server); None means Anthropic's.
        settings: Default settings for every request: `ModelSettings` or a mapping like
            ``{"temperature": 0}``.
        retry: How transient failures are retried (`RetryConfig()` by default: 5 tries, 120 s).
        client: An ``anthropic.AsyncAnthropic`` client to use instead of creating one; its own
            retries should be off (``max_retries=0``), and you close it.
    """

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        settings: ModelSettingsLike | None = None,
        retry: RetryConfig | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        self._setup(
            import_sdk("anthropic", "AnthropicModel"),
            name,
            "claude-sonnet-4-5",
            api_key=api_key,
            base_url=base_url,
            settings=settings,
            retry=retry,
            client=client,
            label="Anthropic",
            api="Anthropic's messages API",
        )

    @property
    def provider(self) -> str:
        """``"anthropic"``."""
        return "anthropic"

    def check_credentials(self) -> None:
        """Raise `UserError` now if requests would fail for want of an API key (no network I/O)."""
        if self._given_client or self._api_key or os.environ.get("ANTHROPIC_API_KEY"):
            return
        if os.environ.get("ANTHROPIC_AUTH_TOKEN"):  # the SDK's other way in
            return
        raise UserError(
            f"AnthropicModel({self._name!r}) has no API key. Set the ANTHROPIC_API_KEY environment variable "
            "or pass api_key=..."
        )

    def _new_client(self) -> AsyncAnthropic:
        try:
            return cast(
                "AsyncAnthropic",
                self._sdk.AsyncAnthropic(api_key=self._api_key, base_url=self._base_url, max_retries=0),
            )
        except self._sdk.AnthropicError as exc:
            raise UserError(
                f"AnthropicModel({self._name!r}) cannot be set up ({exc}). Set the ANTHROPIC_API_KEY "
                "environment variable or pass api_key=..."
            ) from None

    async def _create(self, client: AsyncAnthropic, kwargs: dict[str, Any]) -> Any:
        return await client.messages.create(**kwargs)

    async def _stream_events(
        self, client: AsyncAnthropic, kwargs: dict[str, Any]
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        state = _StreamState(StreamBuilder(model_name=self._name))
        response: Any = await client.messages.create(**kwargs)
        async with response as raw_events:
            async for raw in raw_events:
                for event in state.feed(raw):
                    yield event
        yield state.builder.complete()

    # -- conversion ---------------------------------------------------------------------------

    def _kwargs(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition], s: ModelSettings, *, stream: bool
    ) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        kwargs: dict[str, Any] = {
            "model": self._name,
            "messages": _messages(messages),
            "max_tokens": s.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if stream:
            kwargs["stream"] = True
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters_json_schema)}
                for t in tools
            ]
            if s.tool_choice is not None or s.parallel_tool_calls is False:
                if isinstance(s.tool_choice, ForceTool):
                    check_forced_tool(s.tool_choice, [d.name for d in tools])
                    choice: dict[str, Any] = {"type": "tool", "name": s.tool_choice.name}
                else:
                    choice = dict(_TOOL_CHOICE[s.tool_choice or "auto"])
                if s.parallel_tool_calls is False and choice["type"] != "none":
                    choice["disable_parallel_tool_use"] = True
                kwargs["tool_choice"] = choice
        # Sampling fields travel in the body: recent SDKs no longer take them as arguments.
        body: dict[str, Any] = {k: getattr(s, k) for k in ("temperature", "top_p") if getattr(s, k) is not None}
        body.update(s.extra_body or {})
        if body:
            kwargs["extra_body"] = body
        if s.extra_headers is not None:
            kwargs["extra_headers"] = dict(s.extra_headers)
        if s.timeout is not None:
            kwargs["timeout"] = s.timeout
        if s.stop is not None:
            kwargs["stop_sequences"] = list(s.stop)
        return kwargs

    def _response(self, message: Any) -> ModelResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
        return ModelResponse(
            message=AssistantMessage(content="".join(texts) or None, tool_calls=tuple(calls)),
            usage=_usage(message.usage),
            model_name=message.model or self._name,
            finish_reason=_FINISH.get(message.stop_reason, "other") if message.stop_reason else None,
        )

    def _credentials_error(self, exc: TypeError) -> Exception:
        # The SDK raises a TypeError at request time when it finds no credentials.
        if "authentication" not in str(exc):
            return exc
        return UserError(
            f"AnthropicModel({self._name!r}) has no API key ({exc}). Set the ANTHROPIC_API_KEY "
            "environment variable or pass api_key=..."
        )

    def _error(self, exc: Exception) -> ToolplanError:
        sdk = self._sdk
        where = self._endpoint.url or self._base_url or "https://api.anthropic.com"
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            if status < 400:  # an error event inside a 200 stream
                kind = error_detail_type(exc.body)
                status = _STREAM_ERROR_STATUS.get(kind, 500)
            return status_error("Anthropic", self._name, status, error_detail(exc.body, exc.message))
        if isinstance(exc, sdk.APITimeoutError):
            return connection_error("Anthropic", self._name, where, exc, timed_out=True)
        if isinstance(exc, sdk.APIConnectionError):
            fix = "base_url=... or ANTHROPIC_BASE_URL"
            return connection_error("Anthropic", self._name, where, exc, timed_out=False, fix=fix)
        return status_error("Anthropic", self._name, 500, error_detail(getattr(exc, "body", None), str(exc)))


def error_detail_type(body: object) -> str:
    """The ``error.type`` of an Anthropic error body, or ``""``."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return cast(str, error["type"])
    return ""


class _StreamState:
    """Anthropic numbers content blocks (text and tool_use alike); tool calls get their own index."""

    __slots__ = ("builder", "input_tokens", "tool_index")

    def __init__(self, builder: StreamBuilder) -> None:
        self.builder = builder
        self.tool_index: dict[int, int] = {}
        self.input_tokens = 0

    def feed(self, raw: Any) -> list[ModelStreamEvent]:
        builder = self.builder
        kind = raw.type
        if kind == "message_start":
            builder.model_name = raw.message.model or builder.model_name
            builder.usage = _usage(raw.message.usage)
        elif kind == "content_block_start":
            block = raw.content_block
            if block.type == "tool_use":
                index = self.tool_index.setdefault(raw.index, len(self.tool_index))
                return builder.tool_call(index, id=block.id, name=block.name)
            if block.type == "text":
                return builder.text(block.text)
        elif kind == "content_block_delta":
            delta = raw.delta
            if delta.type == "text_delta":
                return builder.text(delta.text)
            if delta.type == "input_json_delta" and raw.index in self.tool_index:
                return builder.tool_call(self.tool_index[raw.index], arguments=delta.partial_json)
        elif kind == "message_delta":
            if raw.delta.stop_reason:
                builder.finish_reason = _FINISH.get(raw.delta.stop_reason, "other")
            usage, held = raw.usage, builder.usage  # the delta's counts are cumulative; some may be absent
            builder.usage = Usage(
                requests=1,
                input_tokens=max(held.input_tokens, _input_tokens(usage)),
                output_tokens=usage.output_tokens or 0,
                cached_input_tokens=max(held.cached_input_tokens, getattr(usage, "cache_read_input_tokens", None) or 0),
                cache_write_tokens=max(
                    held.cache_write_tokens, getattr(usage, "cache_creation_input_tokens", None) or 0
                ),
            )
        return []


def _input_tokens(usage: Any) -> int:
    return sum(
        getattr(usage, key, None) or 0
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    return Usage(
        requests=1,
        input_tokens=_input_tokens(usage),
        output_tokens=usage.output_tokens or 0,
        cached_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


def _messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """Anthropic's alternating user/assistant turns; tool results travel in the next user turn."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, SystemMessage):
            continue  # sent as the `system` parameter
        if isinstance(message, UserMessage):
            add("user", [{"type": "text", "text": message.content}])
        elif isinstance(message, ToolReturnMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            add("user", [block])
        else:
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(tool_call_arguments_object(c))}
                for c in message.tool_calls
            )
            if blocks:
                add("assistant", blocks)
    return out
