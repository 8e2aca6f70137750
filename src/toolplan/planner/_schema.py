"""The JSON Schema of a plan over one tool catalogue: valid by construction where a provider enforces it.

Each step is one of the catalogue's tools: its ``tool`` is that name (a ``const``) and its
``arguments`` that tool's own parameters, where each value may also be a reference to an earlier
step's output (``"$ref:ID.path"``), a string with ``{{ID.path}}`` in it, or (for a non-string
parameter) a computed value ``{"$op": OP, "args": [...]}``; a step may carry a condition (``when``:
a reference, an expression or a boolean), both checked when the plan is validated. A provider that enforces
the schema (llama.cpp's server turns it into a grammar; OpenAI's strict mode) can then only write
plans whose tool names exist and whose arguments have the right names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..plan import DEFAULT_MAX_STEPS
from ..plan._internal import OPERATORS
from ..tools import ToolRegistry

__all__ = ("REF_PATTERN", "plan_schema")

# "[$]" and "[.]", not "\\$" and "\\.": llama.cpp turns a pattern into a grammar, where those escapes are
# errors (the server fails the request, or dies).
REF_PATTERN = r"^[$]ref:[A-Za-z0-9_-]+([.][A-Za-z0-9_-]+)*$"
# No description: the planner's instructions explain references once, not once per argument (a
# provider may put the schema into the prompt: llama.cpp's chatml-function-calling does).
_REF = {"type": "string", "pattern": REF_PATTERN}
_PLAIN_STRING_KEYS = frozenset({"type", "title", "description"})
# The length bound is in the pattern too: llama.cpp's grammar follows the pattern and ignores maxLength.
_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "maxLength": 64}
# An expression and a condition are defined once, in the schema's $defs, and referred to: llama.cpp's
# chat handler puts the schema into the prompt, where a copy per argument would crowd a small context.
_EXPR = {"$ref": "#/$defs/expr"}
_DEFS = {
    "expr": {
        "type": "object",
        "properties": {"$op": {"enum": list(OPERATORS)}, "args": {"type": "array"}},
        "required": ["$op", "args"],
    },
    "when": {"anyOf": [_REF, _EXPR, {"type": "boolean"}]},
}


def _argument(schema: Any) -> dict[str, Any]:
    """One argument: its own schema, a reference or an expression (a string may interpolate ``{{ID.path}}``)."""
    own = dict(schema) if isinstance(schema, Mapping) else {}
    if not own:
        return {}
    if own.get("type") == "string" and _PLAIN_STRING_KEYS.issuperset(own):
        return own  # any string: a reference is one already, and "{{ID.path}}" joins strings
    return {"anyOf": [own, _REF, _EXPR]}


def _step(name: str, parameters: Mapping[str, Any], description: str) -> dict[str, Any]:
    properties = parameters.get("properties")
    arguments: dict[str, Any] = {"type": "object"}
    if isinstance(properties, Mapping):
        arguments["properties"] = {key: _argument(value) for key, value in properties.items()}
        arguments["additionalProperties"] = False
        required = parameters.get("required")
        if isinstance(required, list) and required:
            arguments["required"] = list(required)
    if "$defs" in parameters:  # pydantic puts nested models here; refs into it must resolve
        arguments["$defs"] = parameters["$defs"]
    return {
        "type": "object",
        "description": description[:300],
        "properties": {
            "id": _ID,
            "tool": {"const": name},
            "arguments": arguments,
            "depends_on": {"type": "array", "items": _ID},
            "when": {"$ref": "#/$defs/when"},
        },
        "required": ["id", "tool", "arguments"],
        "additionalProperties": False,
    }


def plan_schema(registry: ToolRegistry, *, max_steps: int = DEFAULT_MAX_STEPS) -> dict[str, Any]:
    """The native plan format, specialised to ``registry``'s tools."""
    steps = [_step(d.name, d.parameters_json_schema, d.description) for d in registry.definitions()]
    return {
        "type": "object",
        "properties": {
            "steps": {"type": "array", "minItems": 1, "maxItems": max_steps, "items": {"anyOf": steps}},
            "output_steps": {
                "type": "array",
                "items": _ID,
                "description": "The steps whose outputs answer the question (default: all).",
            },
        },
        "required": ["steps"],
        "additionalProperties": False,
        "$defs": _DEFS,
    }
