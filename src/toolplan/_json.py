"""JSON at toolplan's edges: one bounded parser and one encoder that never fails.

Everything toolplan reads as JSON text from outside (plans, tool-call arguments, plan files, tool
outputs read through a reference) goes through `loads`: nesting, integer size and text size are
bounded, and every failure is one `JSONTextError` whose message says what is wrong and where.

Everything toolplan writes as JSON for a model or a user (model-facing results, tool messages, the
CLI's ``--json``) goes through `dumps`, which always returns valid JSON text that encodes as UTF-8:

- ``NaN``, ``Infinity`` and ``-Infinity`` become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
- a lone surrogate (unencodable) becomes U+FFFD;
- an integer too long to print (over `MAX_INT_DIGITS` digits) becomes a string saying its size;
- a value that contains itself, or is nested too deeply to write, is cut with a marker (at `MAX_DEPTH`);
- any other object is written as its ``str()`` (or its type's name when even that fails).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import jiter

__all__ = (
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_TEXT_CHARS",
    "JSONTextError",
    "Encoder",
    "compact_encoder",
    "dumps",
    "encodable",
    "json_safe",
    "loads",
    "too_deep",
)

MAX_DEPTH: Final = 200
"""Most levels of nested arrays and objects toolplan reads or copies (jiter's own limit is about this)."""
MAX_INT_DIGITS: Final = 4300
"""Most digits of an integer (Python's default ``int`` conversion limit, and jiter's)."""
MAX_TEXT_CHARS: Final = 64 * 1024 * 1024
"""Longest JSON text `loads` reads (64 Mi characters)."""

Reason = Literal["syntax", "depth", "number", "size"]

_POSITION_RE = re.compile(r"^(?P<what>.*?) at line (?P<line>\d+) column (?P<column>\d+)$", re.DOTALL)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class JSONTextError(ValueError):
    """JSON text that toolplan cannot read.

    Attributes:
        message: What is wrong and where, e.g. ``"nested deeper than 200 levels at line 1, column 202"``;
            callers put it into a sentence that says what to do.
        reason: ``"syntax"`` (not JSON), ``"depth"``, ``"number"`` or ``"size"`` (a bound was exceeded).
        line: The line of the problem (1-based), when known.
        column: The column of the problem (1-based), when known.
    """

    def __init__(self, message: str, *, reason: Reason, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason: Reason = reason
        self.line = line
        self.column = column

    @property
    def exceeds_limit(self) -> bool:
        """True when the text may be JSON but breaks a bound (depth, number size, text size)."""
        return self.reason != "syntax"

    @property
    def advice(self) -> str:
        """What to do about it, as the start of a sentence (``"Fix the JSON syntax"``)."""
        return _ADVICE[self.reason]


_ADVICE: Final[dict[Reason, str]] = {
    "syntax": "Fix the JSON syntax",
    "depth": f"Nest values at most {MAX_DEPTH} levels deep",
    "number": "Write numbers this long as strings",
    "size": "Send less text",
}


def loads(text: str | bytes, *, max_chars: int = MAX_TEXT_CHARS) -> Any:
    """Parse JSON text with bounded nesting, integer size and length.

    ``NaN`` and ``Infinity`` are not JSON and are rejected. Duplicate keys keep the last value.

    Raises:
        JSONTextError: the text is not JSON or exceeds a bound; ``.message`` says which and where.
    """
    if len(text) > max_chars:
        raise JSONTextError(f"{len(text):,} characters long, more than the {max_chars:,} toolplan reads", reason="size")
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    try:
        return jiter.from_json(data, allow_inf_nan=False, cache_mode="keys")
    except ValueError as exc:
        raise _text_error(str(exc)) from None


def too_deep(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """True when ``value`` has lists, tuples or dicts nested more than ``max_depth`` levels (or contains itself)."""
    kind = type(value)
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return False
    if max_depth <= 0:
        return True
    for v in items:
        kind = type(v)
        if (kind is dict or kind is list or kind is tuple) and too_deep(v, max_depth - 1):
            return True
    return False


def _text_error(detail: str) -> JSONTextError:
    m = _POSITION_RE.match(detail)
    what, line, column = (m.group("what"), int(m.group("line")), int(m.group("column"))) if m else (detail, None, None)
    where = f" at line {line}, column {column}" if line is not None else ""
    if what == "recursion limit exceeded":
        return JSONTextError(f"nested deeper than {MAX_DEPTH} levels{where}", reason="depth", line=line, column=column)
    if what == "number out of range":
        return JSONTextError(
            f"a number with more than {MAX_INT_DIGITS:,} digits{where}", reason="number", line=line, column=column
        )
    if what == "invalid unicode code point" or what.startswith("unexpected end of hex escape"):
        what += " (a lone surrogate such as \\ud800 is not allowed)"
    return JSONTextError(f"{what}{where}", reason="syntax", line=line, column=column)


def dumps(value: Any, *, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    """``value`` as JSON text that is always valid and always encodable (see the module docstring).

    Compact (``,`` and ``:`` without spaces) unless ``indent`` is given. The common case costs one
    ``json.dumps``; a value it cannot write is first made writable by `json_safe`.
    """
    separators = (",", ":") if indent is None else (",", ": ")
    try:
        if indent is None:  # compact: an encoder made once (json.dumps would build one per call)
            text = "".join(_COMPACT[ensure_ascii, sort_keys](value, 0))
        else:
            text = json.dumps(
                value,
                ensure_ascii=ensure_ascii,
                allow_nan=False,
                indent=indent,
                separators=separators,
                default=_default,
                sort_keys=sort_keys,
            )
    except (ValueError, TypeError, RecursionError):  # NaN, a cycle, a huge int, a bad key, too deep
        text = json.dumps(
            json_safe(value), ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )
    return text if ensure_ascii else encodable(text)


def encodable(text: str) -> str:
    """``text`` with every lone surrogate (which no UTF encoding can write) replaced by U+FFFD."""
    if text.isascii():  # the common case, checked in C far faster than the search below
        return text
    return _SURROGATE_RE.sub("\ufffd", text) if _SURROGATE_RE.search(text) is not None else text


def json_safe(value: Any) -> Any:
    """A copy of ``value`` made only of JSON data that `dumps` (or ``json.dumps``) writes as is.

    Lists, tuples and dicts are copied; scalars are kept unless they are not JSON (non-finite floats,
    huge integers, strings with lone surrogates); other objects become their ``str()``.
    """
    return _safe(value, 0, set())


def _safe(value: Any, depth: int, path: set[int]) -> Any:
    kind = type(value)
    if kind is str:
        return encodable(value)
    if value is None or kind is bool:
        return value
    if isinstance(value, int):
        return _int(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, (dict, list, tuple)):
        if depth >= MAX_DEPTH:
            return f"<nested deeper than {MAX_DEPTH} levels: cut>"
        key = id(value)
        if key in path:
            return "<a value that contains itself: cut>"
        path.add(key)
        try:
            if isinstance(value, dict):
                items: dict[Any, Any] = value
                return {_key(k): _safe(v, depth + 1, path) for k, v in items.items()}
            elems: list[Any] | tuple[Any, ...] = value
            return [_safe(v, depth + 1, path) for v in elems]
        finally:
            path.discard(key)
    if isinstance(value, str):
        return _safe(str.__str__(value), depth, path)
    return _safe(_default(value), depth, path)


def _key(key: Any) -> str:
    if isinstance(key, str):
        text = str.__str__(key)
    elif key is None:
        text = "null"
    elif isinstance(key, bool):
        text = "true" if key else "false"
    elif isinstance(key, int):
        text = str(_int(int(key)))
    elif isinstance(key, float):
        text = str(_float(float(key)))
    else:
        text = _default(key)
    return encodable(text)


def _int(value: int) -> int | str:
    limit = sys.get_int_max_str_digits()  # 0: no limit
    bits = value.bit_length()
    if limit == 0 or bits * _LOG10_2 + 1 < limit:
        return value
    return f"<an integer of about {int(bits * _LOG10_2) + 1:,} digits: not shown>"


def _float(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _default(value: Any) -> str:
    """How `dumps` writes an object that is not JSON data: its ``str()``, or its type's name."""
    try:
        text = str(value)
    except Exception:  # a broken __str__ must not break the output
        return f"<{type(value).__name__} object>"
    return text if type(text) is str else str.__str__(text)


Encoder = Callable[[Any, int], Iterable[str]]
"""A compact JSON encoder: ``"".join(encoder(value, 0))`` is ``value``'s text (see `compact_encoder`)."""

_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # CPython's C encoder, else None


def compact_encoder(default: Callable[[Any], Any], *, ensure_ascii: bool, sort_keys: bool) -> Encoder:
    """A compact JSON encoder that refuses NaN and infinities (ValueError); ``default`` gets what is not JSON data.

    Make it once: it keeps no state, so any thread may use it. On CPython it is the C encoder called
    without `json.JSONEncoder.encode`'s layers (a third of a small value's cost) and without its
    ``markers``: a value that contains itself is a RecursionError there, a ValueError elsewhere.
    """
    if _make_encoder is None:  # not CPython: the same text through the encoder's own iterencode
        encoder = json.JSONEncoder(
            ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"), default=default, sort_keys=sort_keys
        )
        return lambda value, _level: encoder.iterencode(value)
    string = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    made: Encoder = _make_encoder(None, default, string, None, ":", ",", sort_keys, False, False)
    return made


# `dumps`' compact encoders, by (ensure_ascii, sort_keys).
_COMPACT: Final = {
    (ascii_only, sort): compact_encoder(_default, ensure_ascii=ascii_only, sort_keys=sort)
    for ascii_only in (False, True)
    for sort in (False, True)
}

_LOG10_2: Final = math.log10(2)
