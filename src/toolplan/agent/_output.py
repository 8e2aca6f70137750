"""Structured output: the final answer as a validated Python value (``Agent(..., output_type=...)``).

For any ``output_type`` but ``str`` the agent offers the model one more tool, ``final_result``,
whose parameters are the output's JSON Schema (a value that is not a JSON object is wrapped as
``{"response": ...}``, since tool arguments are objects), and asks it in the system prompt to give
its answer by calling it. A call is validated with a pydantic `TypeAdapter`; so is a plain text
answer (as JSON), for models that answer in text anyway. A value that does not validate goes back
to the model with every problem, up to ``output_retries`` times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

import pydantic
from pydantic import TypeAdapter, create_model

from .._errors import UserError
from ..models import ToolCall, ToolReturnMessage
from ..tools import ToolDefinition
from ..tools._internal import _strip_titles

__all__ = ("MISSING", "OUTPUT_TOOL_NAME", "OutputSpec", "OutputValidationFailed", "final_result", "type_name")

OUTPUT_TOOL_NAME = "final_result"
MISSING: Any = object()  # no final result (yet)
OutputT = TypeVar("OutputT")

_MAX_PROBLEMS = 10  # problems listed back to the model (the count says if there were more)
_MAX_INPUT_CHARS = 80  # of each offending value, as the model sent it
_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)


class OutputValidationFailed(Exception):
    """An answer did not validate; ``message`` is what the model is told."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutputSpec(Generic[OutputT]):
    """How an agent asks for, and checks, answers of one ``output_type``."""

    __slots__ = ("_adapter", "_wrapper", "definition", "output_type")

    def __init__(self, output_type: type[OutputT]) -> None:
        self.output_type = output_type
        try:
            self._adapter: TypeAdapter[OutputT] = TypeAdapter(output_type)
            schema = _strip_titles(self._adapter.json_schema())
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
            raise UserError(
                f"output_type={output_type!r} has no JSON Schema, so the model cannot be asked for it: {exc}. "
                "Use a pydantic model, a dataclass, a TypedDict or a type built from JSON types (list[int], ...)."
            ) from None
        self._wrapper: type[pydantic.BaseModel] | None = None
        if schema.get("type") != "object" or "$ref" in schema:
            self._wrapper = create_model("final_result", response=(output_type, ...))
            schema = _strip_titles(self._wrapper.model_json_schema())
        self.definition = ToolDefinition(
            name=OUTPUT_TOOL_NAME,
            description="Give your final answer. Call this once you have everything, instead of answering in text.",
            parameters_json_schema=schema,
        )

    def instructions(self) -> str:
        """The system prompt's section on how to answer."""
        return (
            f"Give your final answer by calling the `{OUTPUT_TOOL_NAME}` tool with arguments matching its "
            "schema, not as text. Call it once, after any other tool calls you need."
        )

    def from_call(self, call: ToolCall) -> OutputT:
        """The value of a ``final_result`` call; `OutputValidationFailed` if it does not validate."""
        try:
            if self._wrapper is not None:
                return cast(OutputT, self._wrapper.model_validate_json(call.arguments or "{}").__dict__["response"])
            return self._adapter.validate_json(call.arguments or "{}")
        except pydantic.ValidationError as exc:
            raise OutputValidationFailed(
                f"The arguments of {OUTPUT_TOOL_NAME} do not match its schema: {_problems(exc)}. "
                f"Call {OUTPUT_TOOL_NAME} again with every problem fixed."
            ) from None

    def from_text(self, text: str) -> OutputT:
        """The value of a text answer read as JSON; `OutputValidationFailed` if it is not one."""
        body = text.strip()
        fenced = _FENCE_RE.match(body)
        if fenced:
            body = fenced.group(1).strip()
        try:
            return self._adapter.validate_json(body)
        except pydantic.ValidationError as exc:
            raise OutputValidationFailed(
                f"Your answer is not a valid final result: {_problems(exc)}. Give your final answer by "
                f"calling the {OUTPUT_TOOL_NAME} tool with arguments matching its schema."
            ) from None


def _problems(exc: pydantic.ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:_MAX_PROBLEMS]:
        loc = ".".join(str(p) for p in err["loc"]) or "(the value)"
        given = _clip(err.get("input"))
        parts.append(f"{loc}: {err['msg']} (got {given})")
    more = len(errors) - _MAX_PROBLEMS
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _clip(value: Any) -> str:
    # The value is the model's (hostile input): a huge integer or deep nesting must not break the message.
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= _MAX_INPUT_CHARS else f"{text[:_MAX_INPUT_CHARS]}..."


def final_result(
    output: OutputSpec[Any], calls: Sequence[ToolCall]
) -> tuple[Any, dict[str, ToolReturnMessage], OutputValidationFailed | None]:
    """The value of the first valid ``final_result`` call (or `MISSING`), a reply per call, the last problem."""
    value: Any = MISSING
    failure: OutputValidationFailed | None = None
    replies: dict[str, ToolReturnMessage] = {}
    for call in calls:
        if value is not MISSING:
            content, is_error = "Not used: this turn already gave a valid final result.", False
        else:
            try:
                value = output.from_call(call)
                content, is_error = "Final result received.", False
            except OutputValidationFailed as exc:
                failure = exc
                content, is_error = f"Error: {exc.message}", True
        replies[call.id] = ToolReturnMessage(tool_call_id=call.id, name=call.name, content=content, is_error=is_error)
    return value, replies, failure


def type_name(tp: Any) -> str:
    """A type's name for messages: ``City``, ``list[int]``."""
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)
