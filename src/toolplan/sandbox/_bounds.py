"""Bounds on data that comes from model code: JSON text from the subprocess child, values from Monty.

Everything the code hands the host (a frame, a tool call's arguments, a result) is hostile input. It
must be JSON data (dicts with string keys, lists, strings, finite numbers, booleans, ``None``), with
integers of at most `MAX_INT_DIGITS` digits, so that nothing the host does with it later
(``json.dumps``, ``str``, a comparison) can recurse without end or raise. A value (a result, a tool
call's arguments) may be `MAX_DEPTH` levels deep; a whole frame `MAX_FRAME_DEPTH`, which leaves room
for the levels a frame adds around its value.

`loads` is the one place the sandbox parses text from the code; it can be switched to a shared bounded
parser without touching its callers.
"""

from __future__ import annotations

import json
import math
from typing import Any

import jiter

__all__ = ("MAX_DEPTH", "MAX_FRAME_DEPTH", "MAX_INT_DIGITS", "DataError", "DataTooLarge", "check_data", "loads")

MAX_DEPTH = 100
"""Nesting levels allowed in a value from the code: a result, a tool call's arguments."""

MAX_FRAME_DEPTH = 200
"""Nesting levels allowed in a whole frame from the subprocess child (jiter's own recursion limit)."""

MAX_INT_DIGITS = 4300
"""Decimal digits allowed in an integer from the code (CPython's ``int``/``str`` conversion limit)."""

_BIG_INT_BITS = 14_000  # below this an int certainly has fewer than MAX_INT_DIGITS digits


class DataError(ValueError):
    """Data from the code is not bounded JSON data; the message says what is wrong with it."""


def loads(data: bytes) -> Any:
    """Parse JSON text from the code: at most `MAX_FRAME_DEPTH` deep, finite numbers, bounded integers.

    Raises:
        DataError: The text is not JSON, or breaks one of the bounds.
    """
    try:
        value = jiter.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        raise DataError(_explain(str(exc), data)) from None
    # jiter turns a literal that overflows a float (1e999) into inf even with allow_inf_nan=False.
    try:
        json.dumps(value, allow_nan=False, check_circular=False)
    except ValueError:
        raise DataError("it holds a number too large for a float (it would be infinity)") from None
    return value


def _explain(message: str, data: bytes) -> str:
    if message.startswith("recursion limit exceeded"):
        return f"it is nested more than {MAX_FRAME_DEPTH} levels deep"
    if message.startswith("number out of range"):
        return f"it holds a number with more than {MAX_INT_DIGITS} digits"
    if b"NaN" in data or b"Infinity" in data:
        return f"it is not valid JSON ({message}); NaN and Infinity are not JSON, use null or a string"
    return f"it is not valid JSON ({message})"


def check_data(value: Any, *, max_bytes: int) -> int:
    """Check that a Python value from the code is bounded JSON data; returns a lower bound of its size.

    The walk goes level by level, never recursing, and stops at `MAX_DEPTH` levels or once it has
    seen more than ``max_bytes`` worth of items, so a self-referencing or widely shared value cannot
    make it loop or explode. Tuples count as lists.

    Raises:
        DataError: ``value`` is not JSON data, or breaks a bound (the message says which).
        DataTooLarge: Its JSON text would be longer than ``max_bytes``.
    """
    size = -3  # the root below is not part of the value
    level: list[Any] = [[value]]
    for depth in range(MAX_DEPTH + 1):  # the containers in `level` are `depth` levels deep
        deeper: list[Any] = []
        for container in level:
            size += 2 + len(container)
            if type(container) is dict:
                for key in container:
                    size += (len(key) if type(key) is str else _key_size(key)) + 3
                children = container.values()
            else:
                children = container
            for child in children:  # the common types first, by identity: this loop is the cost
                kind = type(child)
                if kind is str:
                    size += len(child) + 2
                elif kind is int:
                    size += 1
                    if child.bit_length() > _BIG_INT_BITS:
                        _check_int(child)
                elif kind is dict or kind is list:
                    deeper.append(child)
                elif kind is float:
                    size += 1
                    _check_float(child)
                else:
                    size += _other(child, deeper)
            if size > max_bytes:
                raise DataTooLarge(size)
        if not deeper:
            return size
        if depth == MAX_DEPTH:
            break
        level = deeper
    raise DataError(f"it is nested more than {MAX_DEPTH} levels deep")


def _other(value: Any, deeper: list[Any]) -> int:
    if value is None or isinstance(value, bool):
        return 4
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, int):
        _check_int(value)
        return 1
    if isinstance(value, float):
        _check_float(value)
        return 1
    if isinstance(value, dict | list | tuple):
        deeper.append(value)
        return 0
    raise DataError(
        f"it holds a {type(value).__name__}, which is not JSON data "
        "(use dicts, lists, strings, numbers, booleans and None)"
    )


def _check_int(value: int) -> None:
    if value.bit_length() > _BIG_INT_BITS and _too_many_digits(value):
        raise DataError(f"it holds an integer with more than {MAX_INT_DIGITS} digits")


def _check_float(value: float) -> None:
    if not math.isfinite(value):
        raise DataError(f"it holds the number {value!r}, which is not JSON; use None or a string")


def _key_size(key: Any) -> int:
    """``json.dumps`` turns number, boolean and ``None`` keys into strings, as Python code expects."""
    if isinstance(key, str):
        return len(key)
    if key is None or isinstance(key, bool | float):
        return 4
    if isinstance(key, int):
        _check_int(key)
        return 1
    raise DataError(f"it has a dict key of type {type(key).__name__}; keys must be strings")


def _too_many_digits(value: int) -> bool:
    try:
        return len(str(abs(value))) > MAX_INT_DIGITS
    except ValueError:  # str() refuses beyond the interpreter's limit
        return True


class DataTooLarge(Exception):
    """The value's JSON text would exceed the size limit; ``size`` is at least how large it is."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size
