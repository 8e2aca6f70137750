"""Host side of the child protocol: length-prefixed JSON frames over a socketpair.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object). The host reads
every frame header before the body, so an oversized message is refused without being buffered, and it
reads in its own task while replies are written in others, so neither side can block the other
whatever the message sizes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
from typing import Any

__all__ = ("HEADER", "MessageTooLarge", "encode", "read_message", "to_jsonable")

HEADER = struct.Struct(">I")


class MessageTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def to_jsonable(value: Any) -> Any:
    """``json.dumps`` fallback for tool values: pydantic models, dataclasses, sets, else ``str``."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False, default=to_jsonable).encode()
    return HEADER.pack(len(data)) + data


async def read_message(reader: asyncio.StreamReader, max_bytes: int) -> dict[str, Any] | None:
    """The next message, or ``None`` at end of stream. Raises `MessageTooLarge` or `ValueError`."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    except asyncio.IncompleteReadError:
        return None
    if size > max_bytes:
        raise MessageTooLarge(size)
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    message = json.loads(body)
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ValueError("protocol message is not an object with an 'op'")
    return message
