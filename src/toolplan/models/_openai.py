"""OpenAI chat completions, and every server that speaks them (Ollama, vLLM, llama.cpp server).

The ``openai`` SDK is imported when a model is created, not when this module is: ``import
toolplan.models`` stays free of optional dependencies.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._errors import ToolplanError, UnexpectedModelBehavior, UserError
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
)
from ._retry import connection_error, error_detail, status_error
from ._sdk import SDKModel, import_sdk
from ._settings import ForceTool, ModelSettings, ModelSettingsLike, RetryConfig, check_forced_tool
from ._streaming import StreamBuilder

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.completion_usage import CompletionUsage

__all__ = ("OpenAIModel",)

_LABELS = {"openai": "OpenAI", "ollama": "Ollama", "openai-compatible": "The OpenAI-compatible server"}
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAIModel(SDKModel):
    """A model behind OpenAI's chat completions API, or any server compatible with it.

    Args:
        name: The model's name, e.g. ``"gpt-4o-mini"`` or the name a local server serves.
        base_url: The API's base URL for compatible servers, e.g. ``"http://localhost:8000/v1"``
            (vLLM) or ``"http://localhost:11434/v1"`` (Ollama). None means OpenAI (or the
            ``OPENAI_BASE_URL`` environment variable).
        api_key: The key; None reads ``OPENAI_API_KEY``. Servers without keys get a placeholder.
        provider: A label for messages and traces; defaults to ``"openai"``, or
            ``"openai-compatible"`` with a ``base_url``.
        settings: Default settings for every request: `ModelSettings` or a mapping like
            ``{"temperature": 0}``.
        retry: How transient failures are retried (`RetryConfig()` by default: 5 tries, 120 s).
        client: An ``openai.AsyncOpenAI`` client to use instead of creating one; its own retries
            should be off (``max_retries=0``), and you close it.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        settings: ModelSettingsLike | None = None,
        retry: RetryConfig | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self._provider = provider or ("openai" if base_url is None else "openai-compatible")
        self._setup(
            import_sdk("openai", "OpenAIModel"),
            name,
            "gpt-4o-mini",
            api_key=api_key,
            base_url=base_url,
            settings=settings,
            retry=retry,
            client=client,
            label=_LABELS.get(self._provider, self._provider),
            api="a chat completions API",
        )
        # OpenAI itself wants max_completion_tokens; compatible servers mostly know only max_tokens.
        self._official_api = "api.openai.com" in (base_url or os.environ.get("OPENAI_BASE_URL") or "api.openai.com")

    @property
    def provider(self) -> str:
        """``"openai"``, ``"ollama"``, ``"openai-compatible"`` or the label given."""
        return self._provider

    def _key(self) -> str | None:
        """The API key to send; a placeholder for other servers (most local ones want none)."""
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and not self._official_api:
            api_key = "not-needed"
        return api_key

    def check_credentials(self) -> None:
        """Raise `UserError` now if requests would fail for want of an API key (no network I/O)."""
        if not self._given_client and self._key() is None:
            raise UserError(
                f"OpenAIModel({self._name!r}) has no API key. Set the OPENAI_API_KEY environment variable "
                "or pass api_key=...; for a local server, pass base_url=... or set OPENAI_BASE_URL."
            )

    def _new_client(self) -> AsyncOpenAI:
        self.check_credentials()
        try:
            return cast(
                "AsyncOpenAI", self._sdk.AsyncOpenAI(api_key=self._key(), base_url=self._base_url, max_retries=0)
            )
        except self._sdk.OpenAIError as exc:
            raise UserError(
                f"OpenAIModel({self._name!r}) cannot be set up ({exc}). Set the OPENAI_API_KEY "
                "environment variable or pass api_key=..."
            ) from None

    async def _create(self, client: AsyncOpenAI, kwargs: dict[str, Any]) -> ChatCompletion:
        return cast("ChatCompletion", await client.chat.completions.create(**kwargs))

    async def _stream_events(
        self, client: AsyncOpenAI, kwargs: dict[str, Any]
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        builder = StreamBuilder(model_name=self._name)
        received = False
        response = await client.chat.completions.create(**kwargs)
        async with response as chunks:
            async for chunk in cast("AsyncIterator[ChatCompletionChunk]", chunks):
                received = True
                for event in self._chunk_events(builder, chunk):
                    yield event
        if not received:
            raise UnexpectedModelBehavior(
                f"{self._label} ended the stream for model {self._name!r} without sending anything; "
                "the server probably failed while streaming. Check its logs, or try a non-streamed request."
            )
        yield builder.complete()

    # -- conversion ---------------------------------------------------------------------------

    def _kwargs(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition], s: ModelSettings, *, stream: bool
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self._name,
            "messages": [_message(m, null_content=self._official_api) for m in messages],
        }
        if tools:
            kwargs["tools"] = [_tool(t) for t in tools]
            if s.parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = s.parallel_tool_calls
            if isinstance(s.tool_choice, ForceTool):
                check_forced_tool(s.tool_choice, [d.name for d in tools])
                kwargs["tool_choice"] = {"type": "function", "function": {"name": s.tool_choice.name}}
            elif s.tool_choice is not None:
                kwargs["tool_choice"] = s.tool_choice
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        if s.max_tokens is not None:
            kwargs["max_completion_tokens" if self._official_api else "max_tokens"] = s.max_tokens
        for key in ("temperature", "top_p", "seed", "timeout", "extra_body", "extra_headers"):
            value = getattr(s, key)
            if value is not None:
                kwargs[key] = dict(value) if key.startswith("extra_") else value
        if s.stop is not None:
            kwargs["stop"] = list(s.stop)
        return kwargs

    def _response(self, completion: ChatCompletion) -> ModelResponse:
        if not completion.choices:
            raise UnexpectedModelBehavior(
                f"{self._label} returned no choices for model {self._name!r}; the answer cannot be used. "
                "Check the server's logs."
            )
        choice = completion.choices[0]
        calls: list[ToolCall] = []
        for call in choice.message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is not None:
                calls.append(
                    ToolCall(id=call.id, name=function.name, arguments=cast("str | None", function.arguments) or "")
                )
        return ModelResponse(
            message=AssistantMessage(content=choice.message.content or None, tool_calls=tuple(calls)),
            usage=_usage(completion.usage),
            model_name=completion.model or self._name,
            finish_reason=_finish(cast("str | None", choice.finish_reason)),
        )

    def _chunk_events(self, builder: StreamBuilder, chunk: ChatCompletionChunk) -> list[ModelStreamEvent]:
        if chunk.model:
            builder.model_name = chunk.model
        if chunk.usage is not None:
            builder.usage = _usage(chunk.usage)
        events: list[ModelStreamEvent] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            events += builder.text(delta.content)
            for call in delta.tool_calls or ():
                index = getattr(call, "index", None)
                if index is None:  # some compatible servers leave it out: one call per chunk
                    index = builder.tool_call_count if call.id else max(builder.tool_call_count - 1, 0)
                function = call.function
                events += builder.tool_call(
                    index,
                    id=call.id,
                    name=function.name if function else None,
                    arguments=function.arguments if function else None,
                )
            if choice.finish_reason:
                builder.finish_reason = _finish(choice.finish_reason)
        return events

    def _error(self, exc: Exception) -> ToolplanError:
        sdk = self._sdk
        where = self._endpoint.url or self._base_url or "https://api.openai.com/v1"
        if isinstance(exc, sdk.APIStatusError):
            detail = error_detail(exc.body, exc.message)
            return status_error(self._label, self._name, exc.status_code, detail)
        if isinstance(exc, sdk.APITimeoutError):
            return connection_error(self._label, self._name, where, exc, timed_out=True)
        if isinstance(exc, sdk.APIConnectionError):
            fix = "OLLAMA_BASE_URL" if self._provider == "ollama" else "base_url=... or OPENAI_BASE_URL"
            return connection_error(self._label, self._name, where, exc, timed_out=False, fix=fix)
        # An error object inside a stream: the status line said 200, so the body is all we know.
        return status_error(self._label, self._name, 500, error_detail(getattr(exc, "body", None), str(exc)))


def _finish(reason: str | None) -> FinishReason | None:
    return _FINISH.get(reason, "other") if reason else None


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage(requests=1)
    details = getattr(usage, "prompt_tokens_details", None)  # absent from some servers' answers (and old SDKs)
    return Usage(
        requests=1,
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cached_input_tokens=getattr(details, "cached_tokens", None) or 0,
    )


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters_json_schema),
        },
    }


def _message(message: ModelMessage, *, null_content: bool) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, ToolReturnMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    # OpenAI takes a null content next to tool calls; some compatible servers (llama.cpp) insist on
    # a string, and their chat templates on the key being there.
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.content is None and not null_content:
        out["content"] = ""
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out
