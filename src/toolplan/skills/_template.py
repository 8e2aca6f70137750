"""Plan templates: ``{{params.x}}`` in a saved plan's arguments, found and filled.

A string that is exactly one ``{{params.x}}`` becomes the parameter's value with its type; a
``{{params.x}}`` inside a longer string is replaced by the value's text (strings as they are, other
values as compact JSON). Values put in are never scanned again. Other ``{{...}}`` (step references)
are left for the plan's own references.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._errors import InvalidToolSchemaError, ToolError
from .._json import dumps
from ..tools._internal import normalize_schema

__all__ = ("declared", "fill", "sample_values", "used")

_PARAM = re.compile(r"\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}")
_SAMPLES: dict[str, Any] = {"integer": 0, "number": 0, "string": "", "boolean": False, "array": [], "object": {}}


def used(value: Any) -> set[str]:
    """The parameter names a template uses."""
    found: set[str] = set()
    if isinstance(value, str):
        found.update(_PARAM.findall(value))
    elif isinstance(value, Mapping):
        for item in value.values():
            found |= used(item)
    elif isinstance(value, list):
        for item in value:
            found |= used(item)
    return found


def fill(value: Any, params: Mapping[str, Any]) -> Any:
    """``value`` with every ``{{params.x}}`` replaced by ``params["x"]``."""
    if isinstance(value, str):
        whole = _PARAM.fullmatch(value.strip())
        if whole is not None:
            return params.get(whole.group(1))
        return _PARAM.sub(lambda m: _text(params.get(m.group(1))), value)
    if isinstance(value, Mapping):
        return {key: fill(item, params) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, params) for item in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def declared(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON Schema of the parameters: an object schema, or a map of name to schema made into one.

    Raises:
        ToolError: it is neither.
    """
    if not parameters:
        return {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        raise ToolError("parameters must be a JSON Schema object: {'type': 'object', 'properties': {...}}.")
    if parameters.get("type") == "object" or "properties" in parameters:
        schema = dict(parameters)
        schema.setdefault("type", "object")
    else:  # {"city": {"type": "string"}, ...}
        schema = {"type": "object", "properties": dict(parameters), "required": sorted(parameters)}
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not all(isinstance(p, Mapping) for p in properties.values()):
        raise ToolError("parameters.properties must map each parameter name to its JSON Schema.")
    for name in properties:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", str(name)):
            raise ToolError(f"Parameter name {str(name)[:80]!r} is not valid: use letters, digits and _.")
    try:  # the schema every tool's parameters follow: JSON Schema 2020-12, common dialects read as such
        normalized, _notes = normalize_schema(schema)
    except InvalidToolSchemaError as exc:
        raise ToolError(f"parameters cannot be used, at {exc.path or '/'}: {exc.detail}.") from None
    return normalized


def sample_values(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A value per parameter that its type allows (its default or example when it has one), to validate a template."""
    out: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        if "default" in sub:
            out[name] = sub["default"]
        elif sub.get("examples"):
            out[name] = sub["examples"][0]
        elif sub.get("enum"):
            out[name] = sub["enum"][0]
        else:
            kind = sub.get("type")
            out[name] = _SAMPLES.get(kind[0] if isinstance(kind, list) and kind else kind, "")
    return out
