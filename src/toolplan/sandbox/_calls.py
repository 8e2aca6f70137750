"""Host side of the tool calls the subprocess child asks for: checking each call, encoding the reply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._protocol import encode

__all__ = ("call_problem", "encode_reply")

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
        message = (
            f"The tool returned a value that cannot be sent to the code as JSON ({type(exc).__name__}: "
            f"{str(exc)[:200]}). The tool must return JSON data without cycles; ask its author to fix it."
        )
        return {"ok": False, "error": {"code": "unserialisable_output", "message": message}}
    return outcome
