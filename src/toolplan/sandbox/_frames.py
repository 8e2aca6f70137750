"""The frames the subprocess child may send the host, validated at the edge (pydantic, strict).

The child's end of the channel is within reach of the code it runs, so a frame can be forged: every
frame is parsed with the bounded parser (`_bounds.loads`), then validated against its model here. A
frame that fails either step is a protocol violation and ends the run with a failed result. The
contents of a tool call (the tool's name and arguments) are checked per call instead, so a bad call
comes back to the code as a failed call, as it would from ``call_tool``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ._bounds import DataError, loads

__all__ = (
    "CallFrame",
    "DoneFrame",
    "Frame",
    "ParallelFrame",
    "ProtocolViolation",
    "ReadyFrame",
    "ResultFrame",
    "parse_frame",
)


class ProtocolViolation(ValueError):
    """A frame from the child is not one the protocol allows; the message says what is wrong."""


class _Frame(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ReadyFrame(_Frame):
    """The child is confined and about to run the code; ``layers`` are the layers it applied."""

    op: Literal["ready"]
    layers: list[Annotated[str, Field(max_length=32)]] = Field(max_length=16)


class ResultFrame(_Frame):
    """``set_result(value)``; ``value`` is JSON data already bounded by the parser."""

    op: Literal["result"]
    value: Any = None


class DoneFrame(_Frame):
    """The code ended; ``error`` is the end of its traceback and ``kind`` the exception's type name."""

    op: Literal["done"]
    error: str | None
    kind: str | None


class CallFrame(_Frame):
    """``call_tool(tool, args)``; ``tool`` and ``args`` are checked per call (`call_problem`)."""

    op: Literal["call"]
    id: int
    tool: Any
    args: Any


class ParallelFrame(_Frame):
    """``call_tools_parallel(calls)``: ``calls`` is a list of ``[tool, args]`` pairs."""

    op: Literal["parallel"]
    id: int
    calls: list[Any]


Frame: TypeAlias = ReadyFrame | ResultFrame | DoneFrame | CallFrame | ParallelFrame

_FRAME: TypeAdapter[Frame] = TypeAdapter(Annotated[Frame, Field(discriminator="op")])


def parse_frame(body: bytes) -> Frame:
    """Parse and validate one frame body from the child.

    Raises:
        ProtocolViolation: The body is not bounded JSON or not a valid frame.
    """
    try:
        data = loads(body)
    except DataError as exc:
        raise ProtocolViolation(str(exc)) from None
    try:
        return _FRAME.validate_python(data)
    except ValidationError as exc:
        raise ProtocolViolation(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = first["loc"]
    if len(loc) < 2:  # no usable tag: not an object, or an 'op' the protocol does not have
        return "it is not a JSON object with a known 'op' (ready, result, done, call, parallel)"
    field = ".".join(str(part) for part in loc[1:])
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"in a {loc[0]!r} frame, field {field!r}: {first['msg']}{more}"
