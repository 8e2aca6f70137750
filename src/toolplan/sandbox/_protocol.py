"""Host side of the child protocol: length-prefixed JSON frames over a socketpair.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object). The host reads
every frame header before the body, so an oversized message is refused without being buffered, and it
reads in its own task while replies are written in others, so neither side can block the other
whatever the message sizes. The code can reach the child's end of the channel, so every frame from it
is hostile input: parsed with bounds and validated (`_frames`) before the host acts on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
from typing import Any

from ._frames import Frame, parse_frame

__all__ = ("HEADER", "MessageTooLarge", "TruncatedFrame", "encode", "read_frame", "to_jsonable")

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


class TruncatedFrame(Exception):
    """The channel closed in the middle of a frame: ``got`` of ``expected`` bytes arrived."""

    def __init__(self, got: int, expected: int) -> None:
        super().__init__(got, expected)
        self.got = got
        self.expected = expected


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> Frame | None:
    """The next frame, validated, or ``None`` at a clean end of stream.

    Raises:
        MessageTooLarge: The header announces more than ``max_bytes`` (the body is not read).
        TruncatedFrame: The stream ended inside a frame.
        ProtocolViolation: The body is not bounded JSON or not a valid frame.
    """
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise TruncatedFrame(len(exc.partial), HEADER.size) from None
        return None
    except ConnectionError:  # the child closed its end with our reply unread: it has ended
        return None
    if size > max_bytes:
        raise MessageTooLarge(size)
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise TruncatedFrame(len(exc.partial), size) from None
    except ConnectionError:
        raise TruncatedFrame(0, size) from None
    return parse_frame(body)
