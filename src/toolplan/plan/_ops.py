"""The operators of plan expressions (a step's ``when`` and computed arguments), and their static checks.

An expression is a JSON object ``{"$op": OP, "args": [...]}``; each item of ``args`` is a literal,
a reference (``"$ref:ID.path"`` or ``"{{ID.path}}"``) or another expression. This module knows the
operators: how many operands each takes, what types they must have and what type each gives. It
knows nothing of references (``._refs`` compiles expressions, ``._expr`` evaluates them).

Why a JSON tree and not a formula in a string: the plan tool's JSON Schema can describe it, a model
writes it with the same references it already uses, literals keep their JSON type (``true`` is not
``"true"``), and there is no precedence to get wrong and no parser to attack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = (
    "EXPRESSION_SCHEMA",
    "MAX_EXPRESSION_DEPTH",
    "MAX_EXPRESSION_NODES",
    "MAX_EXPRESSION_TEXT",
    "MAX_INT",
    "OPERATORS",
    "OP_KEY",
    "Operator",
    "Type",
    "static_problem",
    "type_of",
)

OP_KEY: Final = "$op"
"""The key that makes a JSON object an expression."""
MAX_EXPRESSION_NODES: Final = 64
"""Most nodes (operators and operands) in one expression."""
MAX_EXPRESSION_DEPTH: Final = 8
"""Most levels of operators nested in one expression."""
MAX_INT: Final = 10**100
"""Integers an expression reads or makes are below this in size (about 100 digits)."""
MAX_EXPRESSION_TEXT: Final = 100_000
"""Longest string ``concat`` makes, in characters."""

#: A JSON type as far as validation knows it (None: only known when the step runs).
Type = Literal["number", "string", "boolean", "null", "array", "object"]
Operands = Literal["any", "number", "ordered", "sized", "scalar", "reference"]


@dataclass(frozen=True, slots=True)
class Operator:
    """An operator: its operands (count and kind) and the type of its value."""

    min_args: int
    max_args: int | None  # None: any number
    operands: Operands
    result: Type | None  # None: the operands' type
    summary: str


OPERATORS: Final[dict[str, Operator]] = {
    "==": Operator(2, 2, "any", "boolean", "equal (JSON equality: true is not 1)"),
    "!=": Operator(2, 2, "any", "boolean", "not equal"),
    "<": Operator(2, 2, "ordered", "boolean", "less than (two numbers or two strings)"),
    "<=": Operator(2, 2, "ordered", "boolean", "less than or equal"),
    ">": Operator(2, 2, "ordered", "boolean", "greater than"),
    ">=": Operator(2, 2, "ordered", "boolean", "greater than or equal"),
    "not": Operator(1, 1, "any", "boolean", "true when the operand is falsy"),
    "all": Operator(1, None, "any", "boolean", "true when every operand is truthy"),
    "any": Operator(1, None, "any", "boolean", "true when some operand is truthy"),
    "exists": Operator(1, 1, "reference", "boolean", "true when the referenced field is present and not null"),
    "+": Operator(2, None, "number", "number", "sum"),
    "-": Operator(1, 2, "number", "number", "difference (one operand: negation)"),
    "*": Operator(2, None, "number", "number", "product"),
    "/": Operator(2, 2, "number", "number", "quotient (an integer when exact)"),
    "//": Operator(2, 2, "number", "number", "quotient rounded down"),
    "%": Operator(2, 2, "number", "number", "remainder"),
    "min": Operator(1, None, "ordered", None, "smallest operand (or item of one array operand)"),
    "max": Operator(1, None, "ordered", None, "largest operand (or item of one array operand)"),
    "length": Operator(1, 1, "sized", "number", "length of a string, array or object"),
    "concat": Operator(1, None, "scalar", "string", "strings joined (numbers and booleans as JSON text)"),
}

EXPRESSION_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        OP_KEY: {"type": "string", "enum": list(OPERATORS)},
        "args": {"type": "array", "description": "Operands: literals, references or expressions."},
    },
    "required": [OP_KEY, "args"],
    "description": 'An expression, e.g. {"$op": "==", "args": ["$ref:ID.field", true]}.',
}
"""The JSON Schema of one expression, for the schemas shown to models (the plan tool's, the planner's)."""

_ORDERED: Final = frozenset({"<", "<=", ">", ">="})


def type_of(value: object) -> Type | None:
    """The JSON type of a literal value (None for a value that is not JSON data)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def static_problem(op: str, types: list[Type | None]) -> str | None:
    """What is wrong with operands of these types (None: unknown until the step runs), or None."""
    spec = OPERATORS[op]
    known = [t for t in types if t is not None]
    bad: list[Type]
    if spec.operands == "number":
        bad = [t for t in known if t != "number"]
        if bad:
            return f"'{op}' takes numbers, not {_a(bad[0])}"
    elif spec.operands == "sized":
        bad = [t for t in known if t not in ("string", "array", "object")]
        if bad:
            return f"'length' takes a string, an array or an object, not {_a(bad[0])}"
    elif spec.operands == "scalar":
        bad = [t for t in known if t not in ("string", "number", "boolean")]
        if bad:
            return f"'concat' joins strings, numbers and booleans, not {_a(bad[0])}"
    elif spec.operands == "ordered":
        if op in _ORDERED or len(types) > 1:
            bad = [t for t in known if t not in ("number", "string")]
            if bad:
                return f"'{op}' compares numbers or strings, not {_a(bad[0])}"
        if len(set(known)) > 1:
            return f"'{op}' cannot compare {_a(known[0])} with {_a(known[1])}"
    elif op in ("==", "!=") and len(known) == 2 and known[0] != known[1] and "null" not in known:
        return f"'{op}' compares {_a(known[0])} with {_a(known[1])}, which are never equal"
    return None


def _a(t: Type) -> str:
    return {"array": "an array", "object": "an object", "null": "null"}.get(t, f"a {t}")
