"""Shared stream bookkeeping: build a response from deltas, or deltas from a response.

Provider adapters feed what the wire says into a `StreamBuilder` and yield the events it returns;
test models use `response_events` to replay a complete response as a stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ._messages import (
    AssistantMessage,
    FinishReason,
    ModelResponse,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    Usage,
)

__all__ = ("StreamBuilder", "response_events")


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str | None
    parts: list[str] = field(default_factory=list)
    started: bool = False


class StreamBuilder:
    """Accumulates a streamed answer and turns raw wire pieces into `ModelStreamEvent`s.

    A provider may send a tool call's arguments before its name (some OpenAI-compatible servers
    do); such pieces are held back until the name is known, so every ``ToolCallArgsDelta`` follows
    its ``ToolCallStarted``.
    """

    __slots__ = ("_calls", "_order", "_text", "finish_reason", "model_name", "usage")

    def __init__(self, *, model_name: str = "") -> None:
        self._text: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self._order: list[int] = []
        self.model_name = model_name
        self.usage = Usage(requests=1)
        self.finish_reason: FinishReason | None = None

    @property
    def tool_call_count(self) -> int:
        """How many tool calls have been seen so far."""
        return len(self._order)

    def text(self, text: str | None) -> list[ModelStreamEvent]:
        """A piece of text (empty pieces produce no event)."""
        if not text:
            return []
        self._text.append(text)
        return [TextDelta(text=text)]

    def tool_call(
        self, index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
    ) -> list[ModelStreamEvent]:
        """A piece of tool call ``index``: its id and name (first piece) and/or some argument text."""
        events: list[ModelStreamEvent] = []
        call = self._calls.get(index)
        if call is None:
            call = _PendingCall(id=id or f"call_{index}", name=None)
            self._calls[index] = call
            self._order.append(index)
        elif id and not call.started:
            call.id = id
        if name and call.name is None:
            call.name = name
        ordinal = self._order.index(index)
        if call.name is not None and not call.started:
            call.started = True
            events.append(ToolCallStarted(index=ordinal, id=call.id, name=call.name))
            held = "".join(call.parts)
            if held:
                events.append(ToolCallArgsDelta(index=ordinal, id=call.id, delta=held))
        if arguments:
            call.parts.append(arguments)
            if call.started:
                events.append(ToolCallArgsDelta(index=ordinal, id=call.id, delta=arguments))
        return events

    def message(self) -> AssistantMessage:
        """The assistant message assembled so far."""
        calls = tuple(
            ToolCall(
                id=self._calls[i].id,
                name=self._calls[i].name or "",
                arguments="".join(self._calls[i].parts) or "{}",
            )
            for i in self._order
        )
        return AssistantMessage(content="".join(self._text) or None, tool_calls=calls)

    def complete(self) -> ResponseCompleted:
        """The final event carrying the whole response."""
        response = ModelResponse(
            message=self.message(),
            usage=self.usage,
            model_name=self.model_name,
            finish_reason=self.finish_reason,
        )
        return ResponseCompleted(response=response)


def _chunks(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def response_events(response: ModelResponse, *, chunk_size: int | None = None) -> Iterator[ModelStreamEvent]:
    """Replay a complete response as stream events, text and arguments cut into ``chunk_size`` pieces.

    ``chunk_size=None`` sends each text and each argument string as a single delta.
    """
    message = response.message
    if message.content:
        for piece in _chunks(message.content, chunk_size or len(message.content)):
            yield TextDelta(text=piece)
    for index, call in enumerate(message.tool_calls):
        yield ToolCallStarted(index=index, id=call.id, name=call.name)
        if call.arguments:
            for piece in _chunks(call.arguments, chunk_size or len(call.arguments)):
                yield ToolCallArgsDelta(index=index, id=call.id, delta=piece)
    yield ResponseCompleted(response=response)
