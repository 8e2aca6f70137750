"""Host side of the tool calls the subprocess child asks for: checking each call, encoding the reply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import ToolplanError
from ._protocol import encode
from ._types import ToolCaller

__all__ = ("call_problem", "encode_reply", "serve_call", "unserialisable")

_MAX_NAME = 200


def call_problem(name: Any, args: Any) -> str | None:
    """What is wrong with a call from the child, or ``None``; it goes back to the code as a failed call.

    The frame was parsed by the bounded parser, so ``args`` holds only JSON data with string keys;
    what remains to check is the shape.
    """
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
        shown = f"a {type(name).__name__}" if not isinstance(name, str) else f"a string of {len(name)} characters"
        return f"The tool name must be a non-empty string of at most {_MAX_NAME} characters, got {shown}."
    if not isinstance(args, dict):
        return f"call_tool({name!r}, args): args must be a dict of JSON values (or None), got {type(args).__name__}."
    return None


async def serve_call(call_tool: ToolCaller, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Make one call from the code in the host: ``{"ok": True, "value": ...}`` or a failed outcome.

    A failure is ``{"ok": False, "error": {"code", "message"}}``: a `ToolplanError`'s own code and
    message, or ``tool_exception`` for a tool's own bug (the code's error, not the host's).
    """
    try:
        value = await call_tool(name, args)
    except ToolplanError as exc:
        return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
    except Exception as exc:
        return {"ok": False, "error": {"code": "tool_exception", "message": f"{type(exc).__name__}: {exc}"}}
    return {"ok": True, "value": value}


def unserialisable(exc: BaseException) -> dict[str, Any]:
    """The failed outcome that stands for a tool value ``json`` could not encode (``exc``: why)."""
    message = (
        f"The tool returned a value that cannot be sent to the code as JSON ({type(exc).__name__}: "
        f"{str(exc)[:200]}). The tool must return JSON data without cycles; ask its author to fix it."
    )
    return {"ok": False, "error": {"code": "unserialisable_output", "message": message}}


def encode_reply(message_id: int, outcomes: Sequence[dict[str, Any]], *, parallel: bool) -> bytes:
    """The reply frame for one call or a parallel batch.

    Tool values are the host's own data but can still be unencodable (a self-referencing value, or
    one nested too deep for ``json.dumps``); such a value becomes a failed call for the code.
    """
    try:
        return _encode(message_id, outcomes, parallel)
    except (ValueError, TypeError, RecursionError):
        pass
    return _encode(message_id, [_encodable(o) for o in outcomes], parallel)


def _encode(message_id: int, outcomes: Sequence[dict[str, Any]], parallel: bool) -> bytes:
    if parallel:
        return encode({"id": message_id, "ok": True, "results": list(outcomes)})
    return encode({"id": message_id, **outcomes[0]})


def _encodable(outcome: dict[str, Any]) -> dict[str, Any]:
    try:
        encode(outcome)
    except (ValueError, TypeError, RecursionError) as exc:
        return unserialisable(exc)
    return outcome
