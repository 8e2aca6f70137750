"""Evaluating compiled expressions (EXPR nodes, see ``._refs``) when a step is about to run.

Operands come from tool outputs, which are outside input: every operator checks its operands'
types, integers stay below `MAX_INT`, floats finite, strings `MAX_EXPRESSION_TEXT` characters at
most; a division by zero or a wrong type raises `ExpressionFailed`, which fails the step (error
kind ``invalid_expression``) and never the run. There are no names, calls or loops: the work is
bounded by the expression's size, which validation bounds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from .._json import MAX_DEPTH
from ._ops import MAX_EXPRESSION_TEXT, MAX_INT
from ._refs import DICT, EXPR, LITERAL, REF, TEMPLATE

__all__ = ("MISSING", "ExpressionFailed", "evaluate", "explain", "render", "truthy")

MISSING: Any = object()
"""What a reference to a field the output does not have reads as."""

ValueOf = Callable[[Any], Any]
"""The value of an operand node that is not an expression (a reference's: `MISSING` if absent)."""


class ExpressionFailed(Exception):
    """An expression could not be evaluated; the message says why and what to do (an internal signal)."""


def truthy(value: Any) -> bool:
    """JSON truthiness: null, a missing field, false, 0, "", [] and {} are false; everything else true."""
    if value is None or value is MISSING:
        return False
    kind = type(value)
    if kind is bool:
        return value is True
    if kind is int or kind is float:
        return bool(value != 0)
    if kind is str or kind is list or kind is dict:
        return len(value) > 0
    try:
        return bool(value)
    except Exception as exc:  # an object whose __bool__ or __len__ fails
        raise ExpressionFailed(f"The truth of a {type(exc).__name__}-raising value cannot be told.") from None


def evaluate(node: tuple[Any, ...], value_of: ValueOf) -> Any:
    """The value of an EXPR node ``(EXPR, op, *operands)``.

    Raises:
        ExpressionFailed: an operand has the wrong type, a division by zero, a result out of bounds.
    """
    op = node[1]
    operands = node[2:]
    if op == "all":
        return all(truthy(_value(a, value_of)) for a in operands)
    if op == "any":
        return any(truthy(_value(a, value_of)) for a in operands)
    if op == "exists":
        v = value_of(operands[0])
        return v is not MISSING and v is not None
    values = [_value(a, value_of) for a in operands]
    if op == "==":
        return _equal(values[0], values[1], 0)
    if op == "!=":
        return not _equal(values[0], values[1], 0)
    if op == "not":
        return not truthy(values[0])
    if op in _COMPARE:
        a, b = _comparable(op, values[0], values[1])
        return _COMPARE[op](a, b)
    if op in _ARITHMETIC:
        return _arithmetic(op, [_number(op, v) for v in values])
    if op == "min" or op == "max":
        return _extreme(op, values)
    if op == "length":
        v = values[0]
        if isinstance(v, (str, list, dict)):
            return len(v)
        raise ExpressionFailed(f"'length' takes a string, an array or an object, got {_what(v)}.")
    if op == "concat":
        return _concat(values)
    raise ExpressionFailed(f"Unknown operator {op!r}.")  # validation lets none through


def _value(operand: Any, value_of: ValueOf) -> Any:
    if type(operand) is not tuple:
        return operand
    if operand[0] == EXPR:
        return evaluate(operand, value_of)
    v = value_of(operand)
    return None if v is MISSING else v


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}
_ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%"})


def _is_number(v: Any) -> bool:
    return type(v) is not bool and isinstance(v, (int, float))


def _equal(a: Any, b: Any, depth: int) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, arrays and objects item by item."""
    if depth > MAX_DEPTH:
        raise ExpressionFailed(f"'==' compares values nested deeper than {MAX_DEPTH} levels. Compare a field instead.")
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        xs: list[Any] = list(a)
        ys: list[Any] = list(b)
        return len(xs) == len(ys) and all(_equal(x, y, depth + 1) for x, y in zip(xs, ys, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        da: dict[Any, Any] = a
        db: dict[Any, Any] = b
        return da.keys() == db.keys() and all(_equal(v, db[k], depth + 1) for k, v in da.items())
    if isinstance(a, (list, tuple, dict)) or isinstance(b, (list, tuple, dict)):
        return False
    try:
        return bool(a == b)
    except Exception:  # an object whose __eq__ fails
        return False


def _comparable(op: str, a: Any, b: Any) -> tuple[Any, Any]:
    if (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str)):
        return a, b
    raise ExpressionFailed(f"'{op}' compares two numbers or two strings, got {_what(a)} and {_what(b)}.")


def _number(op: str, v: Any) -> int | float:
    if not _is_number(v):
        raise ExpressionFailed(f"'{op}' takes numbers, got {_what(v)}.")
    number: int | float = v
    return _bounded(op, number)


def _bounded(op: str, x: int | float) -> int | float:
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ExpressionFailed(f"'{op}' gave a number too large to represent. Use smaller numbers.")
    elif not -MAX_INT < x < MAX_INT:
        raise ExpressionFailed(f"'{op}' works with integers of at most 100 digits. Use smaller numbers.")
    return x


def _arithmetic(op: str, xs: list[int | float]) -> int | float:
    try:
        if op == "+":
            total: int | float = 0
            for x in xs:
                total = _bounded(op, total + x)
            return total
        if op == "*":
            product: int | float = 1
            for x in xs:
                product = _bounded(op, product * x)
            return product
        if op == "-":
            return _bounded(op, -xs[0] if len(xs) == 1 else xs[0] - xs[1])
        a, b = xs
        if b == 0:
            raise ExpressionFailed(f"'{op}' divides by zero. Check the divisor before dividing (a 'when' on the step).")
        if op == "/":
            if isinstance(a, int) and isinstance(b, int) and a % b == 0:
                return a // b
            return _bounded(op, a / b)
        return _bounded(op, a // b if op == "//" else a % b)
    except (OverflowError, ArithmeticError) as exc:  # a float too large; ExpressionFailed is not one
        raise ExpressionFailed(f"'{op}' failed: {exc}. Use smaller numbers.") from None


def _extreme(op: str, values: list[Any]) -> Any:
    items = values
    if len(values) == 1 and isinstance(values[0], list):
        items = values[0]
    if not items:
        raise ExpressionFailed(f"'{op}' of an empty array has no value. Check the array's length first.")
    if all(_is_number(v) for v in items) or all(isinstance(v, str) for v in items):
        return min(items) if op == "min" else max(items)
    bad = next(v for v in items if not (_is_number(v) or isinstance(v, str)) or type(v) is not type(items[0]))
    raise ExpressionFailed(f"'{op}' takes numbers or strings (not both), got {_what(bad)}.")


def _concat(values: list[Any]) -> str:
    parts: list[str] = []
    size = 0
    for v in values:
        if isinstance(v, str):
            text = v
        elif isinstance(v, bool):
            text = "true" if v else "false"
        elif _is_number(v):
            text = json.dumps(_bounded("concat", v))
        else:
            raise ExpressionFailed(
                f"'concat' joins strings, numbers and booleans, got {_what(v)}. "
                "Reference a field that holds one (a null may be a missing field)."
            )
        size += len(text)
        if size > MAX_EXPRESSION_TEXT:
            raise ExpressionFailed(f"'concat' would make a string longer than {MAX_EXPRESSION_TEXT:,} characters.")
        parts.append(text)
    return "".join(parts)


def _what(v: Any) -> str:
    """A value as messages name it: its JSON type and a short view of it."""
    if v is None or v is MISSING:
        return "null (a missing field or a null value)"
    kind = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return f"{kind.get(type(v), type(v).__name__)} {_show(v)}"


def _show(v: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(v, ensure_ascii=False, default=str)
    except Exception:  # too deep, a cycle, an int too long to print
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}…"


_INFIX = frozenset({"==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "//", "%"})


def render(c: Any) -> str:
    """A compiled condition or operand as readable text, e.g. ``$ref:check.count > 0``."""
    if type(c) is not tuple:
        return _show(c)
    tag = c[0]
    if tag == REF:
        return str(c[3])
    if tag == EXPR:
        op, operands = c[1], c[2:]
        inner = [_operand_text(o) for o in operands]
        if op in _INFIX and len(inner) >= 2:
            return f" {op} ".join(inner)
        if op == "-":
            return f"-{inner[0]}"
        return f"{op}({', '.join(inner)})"
    if tag == TEMPLATE:
        return _show("".join(p if type(p) is str else str(p[3]) for p in c[1:]))
    if tag == LITERAL:
        return _show(c[1])
    return "{...}" if tag == DICT else "[...]"


def _operand_text(c: Any) -> str:
    text = render(c)
    return f"({text})" if type(c) is tuple and c[0] == EXPR and c[1] in _INFIX else text


def explain(c: Any, value_of: ValueOf) -> str:
    """A false condition, for the skipped step's record: the condition and what its references held."""
    refs: dict[str, Any] = {}

    def walk(n: Any) -> None:
        if type(n) is not tuple:
            return
        if n[0] == REF:
            refs.setdefault(n[3], n)
        elif n[0] == EXPR or n[0] == TEMPLATE:
            for o in n[1:]:
                walk(o)

    walk(c)
    seen: list[str] = []
    for text, ref in list(refs.items())[:5]:
        try:
            v = value_of(ref)
        except Exception:  # a value that cannot be read: the run reports that elsewhere
            continue
        seen.append(f"{text} is {'missing' if v is MISSING else _show(v)}")
    return f"Condition false: {render(c)}" + (f" ({'; '.join(seen)})." if seen else ".")
