"""Models for tests: no network, deterministic, with every request recorded.

All of them report approximate usage (`toolplan.models._messages.approximate_tokens`: one token per
word or punctuation mark) and keep what they were sent in ``.requests``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeAlias

from .._errors import UnexpectedModelBehavior, UserError
from ..agent import BATCH_TOOL_NAME, CODE_TOOL_NAME, OUTPUT_TOOL_NAME, PLAN_TOOL_NAME
from ..execute._internal import set_retry_backoff
from ..models import (
    AssistantMessage,
    Model,
    ModelMessage,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseCompleted,
    ToolCall,
    ToolReturnMessage,
    Usage,
)
from ..models._internal import (
    StreamBuilder,
    approximate_tokens,
    message_text,
    response_events,
    set_model_requests_allowed,
)
from ..plan import DEFAULT_MAX_STEPS, META_TOOL_NAMES
from ..tools import ToolDefinition
from ._schema_args import schema_value

__all__ = (
    "FunctionInfo",
    "FunctionModel",
    "RecordedRequest",
    "ScriptedModel",
    "TestModel",
    "ToolCallChunk",
    "disable_retry_backoff",
    "forbid_model_requests",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request a test model received.

    Attributes:
        messages: The conversation as sent.
        tools: The tools offered.
        settings: The settings passed to the request (None if none).
        stream: True when it came through `Model.stream`.
    """

    messages: tuple[ModelMessage, ...]
    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings | None
    stream: bool


class _RecordingModel(Model):
    """Records requests and sums usage; subclasses produce the answers."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name
        self.requests: list[RecordedRequest] = []
        self.usage = Usage()

    @property
    def name(self) -> str:
        """The name given to the test model."""
        return self._model_name

    @property
    def provider(self) -> str:
        """``"test"``."""
        return "test"

    async def request(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """The model's answer (see the class docstring); the request is recorded in `requests`."""
        return await self._answer(self._record(messages, tools, settings, stream=False))

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        """The same answer as `request`, as stream events (see the class docstring)."""
        async with contextlib.aclosing(self._events(self._record(messages, tools, settings, stream=True))) as events:
            async for event in events:
                yield event

    async def _answer(self, request: RecordedRequest) -> ModelResponse:
        raise NotImplementedError

    def _events(self, request: RecordedRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        raise NotImplementedError

    def _record(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None,
        *,
        stream: bool,
    ) -> RecordedRequest:
        request = RecordedRequest(messages=tuple(messages), tools=tuple(tools), settings=settings, stream=stream)
        self.requests.append(request)
        return request

    def _finish(self, request: RecordedRequest, response: ModelResponse | AssistantMessage | str) -> ModelResponse:
        """Fill in usage (approximate when not given), model name and finish reason; add up usage."""
        if isinstance(response, str):
            response = AssistantMessage(content=response)
        if isinstance(response, AssistantMessage):
            response = ModelResponse(message=response)
        usage = response.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            usage = Usage(
                requests=1,
                input_tokens=sum(approximate_tokens(message_text(m)) for m in request.messages),
                output_tokens=approximate_tokens(message_text(response.message)),
            )
        finish = response.finish_reason or ("tool_calls" if response.message.tool_calls else "stop")
        response = ModelResponse(
            message=response.message,
            usage=usage,
            model_name=response.model_name or self._model_name,
            finish_reason=finish,
        )
        self.usage = self.usage + usage
        return response


class _ReplayingModel(_RecordingModel):
    """A test model that decides a whole answer per request; `stream` replays it in small deltas."""

    chunk_size: int

    def _respond(self, request: RecordedRequest) -> ModelResponse:
        raise NotImplementedError

    async def _answer(self, request: RecordedRequest) -> ModelResponse:
        return self._respond(request)

    async def _events(self, request: RecordedRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        # The same answer as `request`, in deltas of ``chunk_size`` characters.
        for event in response_events(self._respond(request), chunk_size=self.chunk_size):
            yield event


class TestModel(_ReplayingModel):
    """Calls every tool once with schema-valid arguments, then answers with a summary of the results.

    On a request whose last message is not a tool result, it calls each selected tool (in the order
    offered) with arguments generated from the tool's JSON Schema; on the next request it answers
    with ``custom_output_text`` or a JSON object mapping each tool name to its result.

    When a meta-tool is selected (``execute_tool_plan``, else ``execute_plan``, else
    ``execute_code``), the selected tools are called through it instead, as a valid plan with one
    step per tool (the step id is the tool's name), a batch, or code calling each tool; the other
    meta-tools are not called. Selecting only a meta-tool sends every offered tool through it.

    When the agent has a structured ``output_type`` (it offers ``final_result``), the final answer
    is a call of ``final_result`` with ``custom_output_args``, or else arguments generated from its
    schema; ``final_result`` is never called with the other tools.

    Args:
        call_tools: ``"all"`` or the names of the tools to call (others are not called).
        custom_output_text: The final answer's text instead of the JSON summary (also sent for a
            structured ``output_type``, instead of calling ``final_result``, when given).
        custom_output_args: The arguments of the ``final_result`` call for a structured ``output_type``.
        model_name: The name it reports.
        chunk_size: Characters per delta when streamed.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        call_tools: Literal["all"] | Sequence[str] = "all",
        custom_output_text: str | None = None,
        custom_output_args: Any = None,
        model_name: str = "test",
        chunk_size: int = 8,
    ) -> None:
        super().__init__(model_name)
        if isinstance(call_tools, str) and call_tools != "all":
            raise UserError(f"TestModel(call_tools=...) takes 'all' or a list of tool names, got {call_tools!r}.")
        self.call_tools = call_tools
        self.custom_output_text = custom_output_text
        self.custom_output_args = custom_output_args
        self.chunk_size = chunk_size
        self._calls = 0

    def _respond(self, request: RecordedRequest) -> ModelResponse:
        final = next((t for t in request.tools if t.name == OUTPUT_TOOL_NAME), None)
        offered = [t for t in request.tools if t is not final]  # the answer's tool is not a tool to try
        selected = [t for t in self._selected(request.tools) if t is not final]
        last = request.messages[-1] if request.messages else None
        if selected and not isinstance(last, ToolReturnMessage):
            calls = [self._call(name, arguments) for name, arguments in _tool_calls(selected, offered)]
            if calls:
                return self._finish(request, AssistantMessage(tool_calls=tuple(calls)))
        if self.custom_output_text is not None:
            return self._finish(request, self.custom_output_text)
        if final is not None:
            arguments = self.custom_output_args
            if arguments is None:
                arguments = schema_value(final.parameters_json_schema)
            return self._finish(request, AssistantMessage(tool_calls=(self._call(OUTPUT_TOOL_NAME, arguments),)))
        return self._finish(request, _summary(request.messages))

    def _call(self, name: str, arguments: Any) -> ToolCall:
        self._calls += 1
        return ToolCall(id=f"call_{self._calls}", name=name, arguments=json.dumps(arguments))

    def _selected(self, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        if self.call_tools == "all":
            return list(tools)
        offered = {t.name: t for t in tools}
        missing = [n for n in self.call_tools if n not in offered]
        if missing:
            raise UserError(
                f"TestModel(call_tools=...) names tools that were not offered: {', '.join(missing)}. "
                f"Offered: {', '.join(offered) or '(none)'}."
            )
        return [offered[n] for n in self.call_tools]


_STEP_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_THROUGH = (PLAN_TOOL_NAME, BATCH_TOOL_NAME, CODE_TOOL_NAME)  # meta-tools that take the calls, preferred first


def _tool_calls(selected: Sequence[ToolDefinition], offered: Sequence[ToolDefinition]) -> list[tuple[str, Any]]:
    """``(tool name, arguments)`` of `TestModel`'s calls: direct, or through one meta-tool."""
    names = {t.name for t in selected}
    through = next((n for n in _THROUGH if n in names), None)
    tools = [t for t in selected if t.name not in META_TOOL_NAMES]
    if through is None:
        return [(t.name, schema_value(t.parameters_json_schema)) for t in tools]
    if not tools:  # only meta-tools were selected: every offered tool goes through the first
        tools = [t for t in offered if t.name not in META_TOOL_NAMES]
    if not tools:
        return []  # nothing to call: an empty plan would be invalid
    # A plan or a batch holds at most DEFAULT_MAX_STEPS steps (50, the batch limit too): call the rest directly.
    inside, rest = tools[:DEFAULT_MAX_STEPS], tools[DEFAULT_MAX_STEPS:]
    calls = [(through, _through_arguments(through, inside))]
    calls += [(t.name, schema_value(t.parameters_json_schema)) for t in rest]
    return calls


def _through_arguments(through: str, tools: Sequence[ToolDefinition]) -> dict[str, Any]:
    """A valid native plan, batch or code that calls each of ``tools`` once."""
    args = [(t.name, schema_value(t.parameters_json_schema)) for t in tools]
    if through == PLAN_TOOL_NAME:
        steps = [
            {"id": name if _STEP_ID_RE.match(name) else f"step_{i}", "tool": name, "arguments": arguments}
            for i, (name, arguments) in enumerate(args, 1)
        ]
        return {"steps": steps}
    if through == BATCH_TOOL_NAME:
        return {"steps": [{"tool": name, "args": arguments} for name, arguments in args]}
    # Code: the arguments are JSON data, so their repr is a Python literal.
    body = ", ".join(f"{name!r}: call_tool({name!r}, {arguments!r})" for name, arguments in args)
    return {"code": f"set_result({{{body}}})"}


def _summary(messages: Sequence[ModelMessage]) -> str:
    """JSON of the trailing tool results, by tool name (a list when a tool answered several times)."""
    results: dict[str, Any] = {}
    for message in reversed(messages):
        if not isinstance(message, ToolReturnMessage):
            break
        try:
            value: Any = json.loads(message.content)
        except ValueError:
            value = message.content
        if message.is_error:
            value = {"error": value}
        if message.name in results:
            previous = results[message.name]
            results[message.name] = [value, *previous] if isinstance(previous, list) else [value, previous]
        else:
            results[message.name] = value
    if not results:
        return "success (no tool calls)"
    return json.dumps(dict(reversed(results.items())))


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionInfo:
    """What a `FunctionModel` function gets besides the messages.

    Attributes:
        tools: The tools offered.
        settings: The request's settings (None if none).
        model_name: The model's name.
        stream: True when called through `Model.stream`.
    """

    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings | None
    model_name: str
    stream: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallChunk:
    """A piece of a streamed tool call, yielded by a `FunctionModel` stream function.

    The first chunk of a call carries its ``name`` (and optionally ``id``); later chunks with the
    same ``index`` carry more ``arguments`` text. Yield plain strings for text.
    """

    index: int = 0
    name: str | None = None
    arguments: str = ""
    id: str | None = None


FunctionResult: TypeAlias = ModelResponse | AssistantMessage | str
FunctionDef: TypeAlias = Callable[[list[ModelMessage], FunctionInfo], FunctionResult | Awaitable[FunctionResult]]
StreamFunctionDef: TypeAlias = Callable[
    [list[ModelMessage], FunctionInfo], AsyncIterable[str | ToolCallChunk] | Iterable[str | ToolCallChunk]
]


class FunctionModel(_RecordingModel):
    """A model whose answers come from your function: full control over each turn in a test.

    Args:
        function: ``(messages, info) -> AssistantMessage | ModelResponse | str`` (sync or async).
            Used by `request`, and by `stream` when there is no ``stream_function``.
        stream_function: ``(messages, info) ->`` an (async) iterable of text pieces (``str``) and
            `ToolCallChunk`s; used by `stream`, and by `request` when there is no ``function``.
        model_name: The name it reports.
    """

    def __init__(
        self,
        function: FunctionDef | None = None,
        *,
        stream_function: StreamFunctionDef | None = None,
        model_name: str = "function",
    ) -> None:
        if function is None and stream_function is None:
            raise UserError("FunctionModel needs a function, a stream_function, or both.")
        super().__init__(model_name)
        self.function = function
        self.stream_function = stream_function

    def _info(self, request: RecordedRequest) -> FunctionInfo:
        return FunctionInfo(
            tools=request.tools, settings=request.settings, model_name=self._model_name, stream=request.stream
        )

    async def _answer(self, request: RecordedRequest) -> ModelResponse:
        # The function's answer (or the collected stream function's).
        if self.function is None:
            response: ModelResponse | None = None
            async for event in self._stream_events(request):
                if isinstance(event, ResponseCompleted):
                    response = event.response
            assert response is not None
            return response
        result = self.function(list(request.messages), self._info(request))
        if inspect.isawaitable(result):
            result = await result
        return self._finish(request, result)

    async def _events(self, request: RecordedRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        # The stream function's pieces as events (or the function's answer replayed).
        if self.stream_function is None:
            assert self.function is not None
            result = self.function(list(request.messages), self._info(request))
            if inspect.isawaitable(result):
                result = await result
            for event in response_events(self._finish(request, result)):
                yield event
            return
        async for event in self._stream_events(request):
            yield event

    async def _stream_events(self, request: RecordedRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        assert self.stream_function is not None
        builder = StreamBuilder(model_name=self._model_name)
        pieces = self.stream_function(list(request.messages), self._info(request))
        async for piece in _aiter(pieces):
            if isinstance(piece, str):
                for event in builder.text(piece):
                    yield event
            elif isinstance(piece, ToolCallChunk):
                for event in builder.tool_call(piece.index, id=piece.id, name=piece.name, arguments=piece.arguments):
                    yield event
            else:
                raise UserError(
                    f"A FunctionModel stream function yielded {type(piece).__name__}; yield str for text "
                    "and ToolCallChunk for tool calls."
                )
        yield ResponseCompleted(response=self._finish(request, builder.complete().response))


async def _aiter(
    pieces: AsyncIterable[str | ToolCallChunk] | Iterable[str | ToolCallChunk],
) -> AsyncIterator[str | ToolCallChunk]:
    if isinstance(pieces, AsyncIterable):
        async for piece in pieces:
            yield piece
    else:
        for piece in pieces:
            yield piece


ScriptItem: TypeAlias = ModelResponse | AssistantMessage | str | BaseException


class ScriptedModel(_ReplayingModel):
    """Answers with the given responses, in order; one more request is an error.

    A script item is a `ModelResponse`, an `AssistantMessage`, a string (a text answer) or an
    exception instance, which is raised for that request (to test error handling). Check at the
    end of a test that the whole script was used with `assert_consumed`.

    Args:
        responses: The answers, first request first.
        chunk_size: Characters per delta when streamed (text and tool-call arguments).
        model_name: The name it reports.
    """

    def __init__(self, responses: Iterable[ScriptItem], *, chunk_size: int = 4, model_name: str = "scripted") -> None:
        super().__init__(model_name)
        if chunk_size < 1:
            raise UserError(f"ScriptedModel(chunk_size=...) must be >= 1, got {chunk_size}.")
        self._script: deque[ScriptItem] = deque(responses)
        self._total = len(self._script)
        self.chunk_size = chunk_size

    @property
    def remaining(self) -> int:
        """Responses not used yet."""
        return len(self._script)

    def assert_consumed(self) -> None:
        """Raise `AssertionError` if some responses were never requested."""
        if self._script:
            left = ", ".join(repr(item)[:80] for item in self._script)
            raise AssertionError(
                f"ScriptedModel: {len(self._script)} of {self._total} scripted responses were never requested: {left}"
            )

    def _respond(self, request: RecordedRequest) -> ModelResponse:
        if not self._script:
            raise UnexpectedModelBehavior(
                f"ScriptedModel received request #{len(self.requests)} but its script has only "
                f"{self._total} response(s). Add a response for this request, or find out why the "
                f"model was called again. Last message: {_last(request.messages)}"
            )
        item = self._script.popleft()
        if isinstance(item, BaseException):
            raise item
        return self._finish(request, item)


def _last(messages: Sequence[ModelMessage]) -> str:
    if not messages:
        return "(none)"
    text = message_text(messages[-1])
    return repr(text if len(text) <= 120 else f"{text[:120]}...")


class _Restore:
    """Returned by the switches: they act at once; used as a context manager they undo on exit."""

    __slots__ = ("_undo",)

    def __init__(self, undo: Callable[[], object]) -> None:
        self._undo = undo

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._undo()


def forbid_model_requests(forbid: bool = True) -> _Restore:
    """Make real models (`OpenAIModel`, `AnthropicModel`) fail before any network I/O.

    It takes effect when called, for the whole process, so a ``conftest.py`` can call it once; as a
    context manager (``with forbid_model_requests(): ...``) it restores the previous state on exit.
    Test models are not affected. ``forbid_model_requests(False)`` allows requests again.
    """
    previous = set_model_requests_allowed(not forbid)
    return _Restore(lambda: set_model_requests_allowed(previous))


def disable_retry_backoff() -> _Restore:
    """Retry model requests and tool calls without waiting, keeping every number of attempts.

    Takes effect when called; as a context manager it restores the previous mode on exit. Backoff
    waits become zero, so a test of "429, then 200" or of a flaky idempotent tool runs instantly.
    """
    tools_previous = set_retry_backoff(False)
    try:
        import stamina
    except ImportError:  # no provider extra installed: no model retries
        return _Restore(lambda: set_retry_backoff(tools_previous))
    # cap=True keeps each model's own number of attempts (at most 1000).
    restore = stamina.set_testing(True, attempts=1000, cap=True)

    def undo() -> None:
        restore.__exit__(None, None, None)
        set_retry_backoff(tools_previous)

    return _Restore(undo)
