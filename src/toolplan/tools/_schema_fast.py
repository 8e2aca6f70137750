"""A fast yes for the schemas most tools have: ``fast_check`` compiles a plain schema to one closure.

jsonschema walks a schema keyword by keyword on every call (tens of microseconds for a small
object). Most tool schemas are an object of typed properties, ``required``, ``enum``, bounds and
lengths: for those, the closure says "valid" as jsonschema would, in a few microseconds. It only
ever answers yes or "ask jsonschema": a call it does not accept is checked (and described) by the
full validator, so the two cannot disagree on a refusal. A schema with any other keyword gets no
closure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from typing import Any

__all__ = ("fast_check",)

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    ("title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "format", "$comment")
)
_HANDLED = frozenset(
    (
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    )
)


def _is_integer(v: Any) -> bool:
    kind = type(v)
    return kind is int or (kind is float and v.is_integer())


def _is_number(v: Any) -> bool:
    kind = type(v)
    return kind is int or kind is float


_TYPES: dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}


def fast_check(schema: Any, depth: int = 0) -> Check | None:
    """A closure that returns True only for values ``schema`` accepts; None when the schema is not plain."""
    if schema is True or (isinstance(schema, Mapping) and not schema):
        return lambda v: True
    if not isinstance(schema, Mapping) or depth > 8:
        return None
    keys = set(schema) - _ANNOTATIONS
    if not keys <= _HANDLED:
        return None
    checks: list[Check] = []
    declared = schema.get("type")
    if declared is not None:
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not all(n in _TYPES for n in names):
            return None
        tests = [_TYPES[n] for n in names]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, list) or not all(e is None or type(e) is str for e in enum):
            return None  # numbers and booleans compare by JSON Schema's rules (1 is not true): left to jsonschema
        allowed = frozenset(enum)
        checks.append(lambda v: (v is None or type(v) is str) and v in allowed)
    for check in _bounds(schema).values():
        if check is None:
            return None
        checks.append(check)
    if "items" in schema:
        item = fast_check(schema["items"], depth + 1)
        if item is None:
            return None
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    if {"properties", "required", "additionalProperties"} & keys:
        obj = _object(schema, depth)
        if obj is None:
            return None
        checks.append(obj)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _number_bound(bound: Any, compare: Callable[[Any, Any], bool]) -> Check | None:
    if not _is_number(bound):
        return None

    def check(v: Any) -> bool:
        return not _is_number(v) or compare(v, bound)

    return check


def _size_bound(bound: Any, kind: type, compare: Callable[[int, int], bool]) -> Check | None:
    if not (type(bound) is int and bound >= 0):
        return None

    def check(v: Any) -> bool:  # JSON Schema counts a string's code points, as len() does
        sized: Sized = v
        return type(v) is not kind or compare(len(sized), bound)

    return check


def _bounds(schema: Mapping[str, Any]) -> dict[str, Check | None]:
    out: dict[str, Check | None] = {}
    numeric: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
        ("minimum", lambda v, b: v >= b),
        ("maximum", lambda v, b: v <= b),
        ("exclusiveMinimum", lambda v, b: v > b),
        ("exclusiveMaximum", lambda v, b: v < b),
    )
    for keyword, compare in numeric:
        if keyword in schema:
            out[keyword] = _number_bound(schema[keyword], compare)
    sizes: tuple[tuple[str, type, Callable[[int, int], bool]], ...] = (
        ("minLength", str, lambda n, b: n >= b),
        ("maxLength", str, lambda n, b: n <= b),
        ("minItems", list, lambda n, b: n >= b),
        ("maxItems", list, lambda n, b: n <= b),
    )
    for keyword, kind, size_compare in sizes:
        if keyword in schema:
            out[keyword] = _size_bound(schema[keyword], kind, size_compare)
    return out


def _object(schema: Mapping[str, Any], depth: int) -> Check | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list) or not isinstance(additional, bool):
        return None
    compiled: dict[str, Check] = {}
    for name, sub in properties.items():
        check = fast_check(sub, depth + 1)
        if check is None:
            return None
        compiled[name] = check
    needed = tuple(required)

    def check_object(v: Any) -> bool:
        if type(v) is not dict:
            return True  # not an object: "type" decides
        for name in needed:
            if name not in v:
                return False
        for key, value in v.items():
            check = compiled.get(key)
            if check is None:
                if not additional:
                    return False
            elif not check(value):
                return False
        return True

    return check_object
