"""Arguments that satisfy a JSON Schema, for `TestModel`'s tool calls.

Covers what tool schemas use: objects, arrays, scalars, enums and consts, formats, bounds,
``$ref`` into ``$defs``/``definitions``, ``anyOf``/``oneOf``/``allOf``. A property with a
``default`` gets its default. ``pattern`` is not solved: such strings are ``"a"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

__all__ = ("schema_value",)

_FORMATS = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
    "duration": "PT1S",
}


def schema_value(schema: Mapping[str, Any]) -> Any:
    """A value valid against ``schema`` (a whole schema; ``$ref`` resolves against it)."""
    return _value(schema, schema, depth=0)


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        if not part or not isinstance(node, Mapping):
            break
        node = cast(Mapping[str, Any], node).get(part.replace("~1", "/").replace("~0", "~"), {})
    return cast(Mapping[str, Any], node) if isinstance(node, Mapping) else {}


def _value(schema: Mapping[str, Any], root: Mapping[str, Any], *, depth: int) -> Any:
    if depth > 32:  # a recursive schema: stop with the smallest value
        return None
    if "$ref" in schema:
        merged = {**_resolve(str(schema["$ref"]), root), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _value(merged, root, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [cast(Mapping[str, Any], o) for o in schema[key]]
            # Prefer a real value over null, so the tool gets something to work with.
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return _value(chosen, root, depth=depth + 1)
    if schema.get("allOf"):
        merged = {}
        for part in schema["allOf"]:
            merged.update(part)
        merged.update({k: v for k, v in schema.items() if k != "allOf"})
        return _value(merged, root, depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        return _object(schema, root, depth=depth)
    if kind == "array":
        return _array(schema, root, depth=depth)
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    return None


def _object(schema: Mapping[str, Any], root: Mapping[str, Any], *, depth: int) -> dict[str, Any]:
    properties = cast(Mapping[str, Mapping[str, Any]], schema.get("properties", {}))
    return {name: _value(sub, root, depth=depth + 1) for name, sub in properties.items()}


def _array(schema: Mapping[str, Any], root: Mapping[str, Any], *, depth: int) -> list[Any]:
    prefix = [_value(s, root, depth=depth + 1) for s in schema.get("prefixItems", ())]
    items = schema.get("items")
    count = max(int(schema.get("minItems", 1)), len(prefix))
    if "maxItems" in schema:
        count = min(count, int(schema["maxItems"]))
    if not isinstance(items, Mapping):
        return prefix[:count]
    while len(prefix) < count:
        prefix.append(_value(cast(Mapping[str, Any], items), root, depth=depth + 1))
    if schema.get("uniqueItems") and len(prefix) > 1:
        prefix = prefix[: max(int(schema.get("minItems", 0)), 1)]
    return prefix


def _string(schema: Mapping[str, Any]) -> str:
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    length = max(int(schema.get("minLength", 1)), 1)
    if "maxLength" in schema:
        length = min(length, int(schema["maxLength"]))
    return "a" * length


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    low = schema.get("minimum")
    if "exclusiveMinimum" in schema:
        ex = schema["exclusiveMinimum"]
        low = ex + 1 if integer else ex + 0.5
    high = schema.get("maximum")
    if "exclusiveMaximum" in schema:
        ex = schema["exclusiveMaximum"]
        high = ex - 1 if integer else ex - 0.5
    value: float = 0
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high if low is None else (low + high) / 2
    step = schema.get("multipleOf")
    if step:
        value = math.ceil(value / step) * step
    return math.ceil(value) if integer else value
