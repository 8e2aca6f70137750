"""Provider-neutral messages, responses, usage and stream events.

Every provider adapter converts these to and from its wire format; nothing above ``models/`` ever
sees a provider type. The types are frozen, keyword-only and slotted, tagged with ``role`` (messages)
or ``kind`` (stream events) so that matches over them can be exhaustive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

from .._errors import ToolError
from .._json import JSONTextError, loads

__all__ = (
    "AssistantMessage",
    "FinishReason",
    "ModelMessage",
    "ModelResponse",
    "ModelStreamEvent",
    "ResponseCompleted",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolCallArgsDelta",
    "ToolCallStarted",
    "ToolMessage",
    "ToolReturnMessage",
    "Usage",
    "approximate_tokens",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id: The provider's id for the call; a tool message answers it with the same id.
        name: The tool's name.
        arguments: The arguments as the raw JSON text the model sent (it may be invalid JSON: call
            `parse_arguments` to get a dict or a `ToolError` the model can act on).
    """

    id: str
    name: str
    arguments: str = "{}"

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as a dict.

        An empty string means no arguments (``{}``), as several providers send it for tools without
        parameters.

        Raises:
            ToolError: The text is not JSON, not a JSON object, or exceeds toolplan's bounds (nested
                deeper than 200 levels, an integer of more than 4,300 digits). The message is meant
                for the model.
        """
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = loads(text)
        except JSONTextError as exc:
            what, advice = (
                ("cannot be read as JSON", f"; {exc.advice.lower()}")
                if exc.exceeds_limit
                else ("are not valid JSON", "")
            )
            raise ToolError(
                f"The arguments of the call to tool {self.name!r} {what} ({exc.message}): {_clip(text)}. "
                'Call the tool again with the arguments as one JSON object, for example {"name": "value"}'
                f"{advice}.",
                tool=self.name,
            ) from None
        if not isinstance(value, dict):
            raise ToolError(
                f"The arguments of the call to tool {self.name!r} must be a JSON object, got "
                f"{type(value).__name__} {_clip(text)}. Call the tool again with an object whose keys "
                "are the parameter names.",
                tool=self.name,
            )
        return cast(dict[str, Any], value)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    """Instructions for the model."""

    content: str
    role: Literal["system"] = field(default="system", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """What the user said."""

    content: str
    role: Literal["user"] = field(default="user", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both.

    Attributes:
        content: The text, or None when the model only called tools.
        tool_calls: The calls, in the order the model made them (parallel calls are several).
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    role: Literal["assistant"] = field(default="assistant", init=False)

    def __post_init__(self) -> None:
        # A list passed by hand becomes a tuple: messages stay immutable and hashable.
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReturnMessage:
    """The result of one tool call, sent back to the model.

    Attributes:
        tool_call_id: The id of the `ToolCall` this answers.
        name: The tool's name.
        content: The result as text (usually JSON).
        is_error: The call failed and ``content`` explains why. Anthropic receives the flag as
            ``is_error``; OpenAI-compatible APIs have no such field and receive ``content`` as is, so
            make the content say that the call failed.
    """

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = field(default="tool", init=False)


ToolMessage = ToolReturnMessage
"""Another name for `ToolReturnMessage` (the ``tool`` role of OpenAI's API)."""

ModelMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolReturnMessage
"""Any message of a conversation with a model."""

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "other"]
"""Why the model stopped, mapped from each provider's own vocabulary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Requests and tokens used; add two with ``+``.

    Attributes:
        requests: Model requests made (a retried request counts once).
        input_tokens: Tokens the model read (prompt, including cached prompt tokens).
        output_tokens: Tokens the model wrote.
        cached_input_tokens: Of ``input_tokens``, those read from the provider's prompt cache
            (OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``).
        cache_write_tokens: Of ``input_tokens``, those written to the provider's prompt cache
            (Anthropic's ``cache_creation_input_tokens``).
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """The counts as JSON data (``total_tokens`` included)."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One complete answer of a model.

    Attributes:
        message: The assistant message (text and/or tool calls).
        usage: What this request used (``requests=1``).
        model_name: The model that answered, as the provider reports it.
        finish_reason: Why it stopped; None when the provider did not say.
    """

    message: AssistantMessage
    usage: Usage = field(default_factory=lambda: Usage(requests=1))
    model_name: str = ""
    finish_reason: FinishReason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the answer's text."""

    text: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """The model began tool call number ``index`` (0-based, in the order of the response)."""

    index: int
    id: str
    name: str
    kind: Literal["tool_call_started"] = field(default="tool_call_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallArgsDelta:
    """A piece of the raw JSON arguments of tool call number ``index``."""

    index: int
    id: str
    delta: str
    kind: Literal["tool_call_args_delta"] = field(default="tool_call_args_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCompleted:
    """The last event of every stream: the whole response, as `Model.request` would return it."""

    response: ModelResponse
    kind: Literal["response_completed"] = field(default="response_completed", init=False)


ModelStreamEvent: TypeAlias = TextDelta | ToolCallStarted | ToolCallArgsDelta | ResponseCompleted
"""What `Model.stream` yields; always ends with one `ResponseCompleted`."""


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def approximate_tokens(text: str) -> int:
    """A rough token count: each word and each punctuation mark counts as one token.

    Real tokenizers split long words further, so this under-counts by a modest factor; it is what the
    test models report, good for asserting that usage is counted, not for budgeting.
    """
    return len(_TOKEN_RE.findall(text))


def message_text(message: ModelMessage) -> str:
    """All the text of a message that a model would read (for approximate token counts)."""
    if isinstance(message, AssistantMessage):
        parts = [message.content or ""]
        parts.extend(f"{c.name} {c.arguments}" for c in message.tool_calls)
        return " ".join(parts)
    return message.content


def tool_call_arguments_object(call: ToolCall) -> Mapping[str, Any]:
    """The arguments as an object for APIs that want one (Anthropic's ``tool_use.input``).

    Invalid JSON (a broken call kept in the history) is sent as ``{"_raw_arguments": text}`` so the
    history stays acceptable to the provider and the model can still see what it sent.
    """
    try:
        return call.parse_arguments()
    except ToolError:
        return {"_raw_arguments": call.arguments}
