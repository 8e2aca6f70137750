"""Resolving compiled arguments (`._refs`) against the outputs of finished steps.

Every value a reference inserts is the reader's own: lists, dicts and tuples are copied on hand-over
(`hand_over`), so a tool that changes its input cannot change the recorded output or what other
steps receive. Resolution raises only `ReferenceResolutionError` (a value too deep to copy or to
read as JSON, one that contains itself, one that cannot be written into a string).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from .._errors import ReferenceResolutionError
from .._json import MAX_DEPTH, MAX_INT_DIGITS, JSONTextError, loads
from ._expr import MISSING, evaluate, explain, truthy
from ._ir import MissingField
from ._refs import DICT, EXPR, LIST, LITERAL, REF, Compiled, Ref, Segment

__all__ = (
    "check_condition",
    "get_path",
    "hand_over",
    "null_references",
    "resolve",
    "resolve_compiled",
    "to_text",
)


_MISSING: Any = MISSING  # (an expression tells a missing field from null)


def _maybe_json(value: Any) -> Any:
    # A tool output that is JSON text is parsed before field access. Text that is not JSON stays
    # text (its fields are missing); JSON beyond toolplan's bounds raises `JSONTextError`.
    if isinstance(value, str):
        head = value.lstrip()[:1]
        if head in ("{", "["):
            try:
                return loads(value)
            except JSONTextError as exc:
                if exc.exceeds_limit:
                    raise
                return value
    return value


def get_path(value: Any, path: tuple[Segment, ...]) -> Any:
    """The value at ``path`` inside ``value``, or a sentinel when a segment is missing.

    Raises:
        JSONTextError: a string on the way is JSON text beyond toolplan's bounds (too deep, a number
            too long, too long a text).
    """
    for seg in path:
        value = _maybe_json(value)
        if isinstance(value, dict):
            d = cast(dict[str, Any], value)
            key = seg if isinstance(seg, str) else str(seg)
            if key not in d:
                return _MISSING
            value = d[key]
        elif isinstance(value, list):
            lst = value
            try:
                index = seg if isinstance(seg, int) else int(seg)
            except ValueError:
                return _MISSING
            if not -len(lst) <= index < len(lst):
                return _MISSING
            value = lst[index]
        else:
            return _MISSING
    return value


def to_text(value: Any) -> str:
    """How a value is interpolated into a string: strings as-is, others as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def resolve(
    compiled: Compiled,
    outputs: Mapping[str, Any],
    *,
    missing: MissingField = "null",
    on_missing: Callable[[Ref], None] | None = None,
) -> Any:
    """Build the concrete value of a compiled tree from the outputs of finished steps.

    Lists, dicts and tuples a reference inserts are copies (see `hand_over`).

    Raises:
        ReferenceResolutionError: a referenced value cannot be inserted (the message says why).
    """
    return resolve_compiled(compiled, outputs, missing == "null", on_missing)


def resolve_compiled(
    c: Compiled, outputs: Mapping[str, Any], null: bool, on_missing: Callable[[Ref], None] | None
) -> Any:
    """`resolve` with positional arguments (``null``: a missing field becomes None, else its text).

    The executor calls it once per step; keywords and the extra call of `resolve` cost more than
    resolving a typical step's arguments.

    Raises:
        ReferenceResolutionError: a referenced value cannot be inserted (the message says why).
    """
    tag = c[0]
    if tag == DICT:
        obj: dict[str, Any] = {}
        i, n = 1, len(c)
        while i < n:  # (a while loop costs less here than iter/zip or range, for the usual one or two keys)
            k, v = c[i], c[i + 1]
            i += 2
            if type(v) is not tuple:
                obj[k] = v
            elif v[0] == REF and not v[2]:
                out = outputs[v[1]]  # a whole output: never missing (the step succeeded)
                obj[k] = out if type(out) in _SHARED else hand_over(out, v)
            else:
                obj[k] = resolve_compiled(v, outputs, null, on_missing)
        return obj
    if tag == REF:
        if not c[2]:
            out = outputs[c[1]]
            return out if type(out) in _SHARED else hand_over(out, c)
        value = _field(c, outputs[c[1]])
        if value is _MISSING:
            if on_missing is not None:
                on_missing(c)
            return None if null else c[3]
        return value if type(value) in _SHARED else hand_over(value, c)
    if tag == LITERAL:
        return c[1]
    if tag == LIST:
        seq: list[Any] = []
        for v in c[1:]:
            if type(v) is not tuple:
                seq.append(v)
            elif v[0] == REF and not v[2]:
                out = outputs[v[1]]
                seq.append(out if type(out) in _SHARED else hand_over(out, v))
            else:
                seq.append(resolve_compiled(v, outputs, null, on_missing))
        return seq
    if tag == EXPR:
        return _compute(c, outputs, null, on_missing)
    chunks: list[str] = []
    for part in c[1:]:
        if type(part) is str:
            chunks.append(part)
            continue
        v = _field(part, outputs[part[1]]) if part[2] else outputs[part[1]]
        if v is _MISSING:
            if on_missing is not None:
                on_missing(part)
            chunks.append("null" if null else part[3])
        elif type(v) is str:
            chunks.append(v)
        else:
            try:
                chunks.append(to_text(v))
            except Exception as exc:  # a cycle, an int too long to print, too deep, a broken __str__
                raise _unwritable(part, exc) from None
    return "".join(chunks)


def _compute(c: Compiled, outputs: Mapping[str, Any], null: bool, on_missing: Callable[[Ref], None] | None) -> Any:
    """The value of an EXPR node (a computed argument).

    Raises:
        ExpressionFailed: the expression cannot be evaluated on these values (the message says why).
        ReferenceResolutionError: a referenced value cannot be read.
    """
    return evaluate(c, _reader(outputs, null, on_missing))


def _reader(outputs: Mapping[str, Any], null: bool, on_missing: Callable[[Ref], None] | None) -> Callable[[Any], Any]:
    """How an expression reads an operand that is not an expression (a missing field: `MISSING`)."""

    def value_of(node: Any) -> Any:
        if node[0] == REF:
            out = outputs[node[1]]
            return _field(node, out) if node[2] else out
        return resolve_compiled(node, outputs, null, on_missing)

    return value_of


def check_condition(c: Any, outputs: Mapping[str, Any]) -> str | None:
    """None when a step's compiled ``when`` holds, else why the step is skipped.

    Raises:
        ExpressionFailed: the condition cannot be evaluated on these values.
        ReferenceResolutionError: a referenced value cannot be read.
    """
    if type(c) is not tuple:  # a literal boolean
        return None if c else "Condition false: 'when' is false."
    value_of = _reader(outputs, True, None)
    value = evaluate(c, value_of) if c[0] == EXPR else value_of(c)
    if truthy(value):
        return None
    return explain(c, value_of)


def null_references(compiled: Compiled, outputs: Mapping[str, Any]) -> list[str]:
    """Why each whole-value reference in ``compiled`` gave null, one sentence each.

    For the error of a step whose arguments failed validation: a null the model did not write is
    the likely cause, and the error names the reference.
    """
    found: list[str] = []

    def walk(c: Any) -> None:
        if type(c) is not tuple:
            return
        tag = c[0]
        if tag == REF:
            if c[1] not in outputs:
                return
            try:
                value = _field(c, outputs[c[1]]) if c[2] else outputs[c[1]]
            except ReferenceResolutionError:
                return
            if value is _MISSING:
                found.append(f"{c[3]!r} resolved to null: the output of step {c[1]!r} has no such field")
            elif value is None:
                found.append(f"{c[3]!r} resolved to null: it is null in the output of step {c[1]!r}")
        elif tag == DICT:
            for v in c[2::2]:
                walk(v)
        elif tag == LIST:
            for v in c[1:]:
                walk(v)

    walk(compiled)
    return found


# Types whose values are handed over as they are: immutable, nothing inside to corrupt.
_SHARED = frozenset({str, int, float, bool, type(None)})


def hand_over(value: Any, ref: Ref) -> Any:
    """``value`` (from the output ``ref`` reads) as the reader's own copy.

    Lists, dicts and tuples are copied all the way down (sets and bytearrays shallowly); immutable
    values and other objects are handed over as they are. Much cheaper than ``copy.deepcopy``.

    Raises:
        ReferenceResolutionError: the value is nested deeper than `MAX_DEPTH` levels or contains
            itself, or copying it failed.
    """
    try:
        return _copy(value, MAX_DEPTH)
    except _TooDeep:
        raise _unresolved(
            ref,
            f"the value from step {ref[1]!r} is nested deeper than {MAX_DEPTH} levels or contains itself",
            f"Make {ref[1]!r} return plain JSON data (objects, arrays, strings, numbers) without cycles and less "
            "deeply nested.",
        ) from None
    except Exception as exc:  # a custom container whose copy or iteration fails
        raise _unresolved(ref, f"copying the value from step {ref[1]!r} {_failed(exc)}") from None


class _TooDeep(Exception):
    pass


def _copy(value: Any, depth: int) -> Any:
    # A shallow copy in C, then only the items that are not immutable scalars are replaced: faster
    # than building the container item by item in Python.
    kind = type(value)
    if kind is dict:
        if not depth:
            raise _TooDeep
        d: dict[Any, Any] = value.copy()
        for k, v in d.items():
            if type(v) not in _SHARED:
                d[k] = _copy(v, depth - 1)  # (replacing a key's value while iterating is allowed)
        return d
    if kind is list:
        if not depth:
            raise _TooDeep
        lst: list[Any] = value.copy()
        for i, v in enumerate(lst):
            if type(v) not in _SHARED:
                lst[i] = _copy(v, depth - 1)
        return lst
    if kind is tuple:
        if not depth:
            raise _TooDeep
        tup: tuple[Any, ...] = value
        return tuple([v if type(v) in _SHARED else _copy(v, depth - 1) for v in tup])
    if kind in _SHARED or kind is frozenset or kind is bytes:
        return value
    if isinstance(value, (dict, list)):  # a subclass: keep its type, copy what it holds
        if not depth:
            raise _TooDeep
        new = copy.copy(value)
        if isinstance(new, dict):
            for k, v in list(new.items()):
                new[k] = _copy(v, depth - 1)
        else:
            new[:] = [_copy(v, depth - 1) for v in new]
        return new
    if isinstance(value, (set, bytearray)):
        return copy.copy(value)
    return value  # any other object is handed over as it is


def _field(ref: Ref, output: Any) -> Any:
    """The value at ``ref``'s path inside ``output`` (or the missing sentinel)."""
    try:
        return get_path(output, ref[2])
    except JSONTextError as exc:
        raise _unresolved(
            ref,
            f"the output of step {ref[1]!r} is JSON text that toolplan does not read: {exc.message}",
            f"Make {ref[1]!r} return smaller, less deeply nested data, or pass its whole output on as text with "
            f"'$ref:{ref[1]}'.",
        ) from None
    except Exception as exc:  # a custom mapping or sequence whose lookup fails
        raise _unresolved(ref, f"reading the field from the output of step {ref[1]!r} {_failed(exc)}") from None


def _unresolved(ref: Ref, why: str, advice: str = "") -> ReferenceResolutionError:
    """The error of a reference whose value cannot be had: what went wrong, then what the plan's author can do."""
    advice = advice or f"Make {ref[1]!r} return plain JSON data."
    return ReferenceResolutionError(
        f"{ref[3]!r} cannot be resolved: {why}. {advice}", reference=ref[3], source_step=ref[1]
    )


def _failed(exc: Exception) -> str:
    return f"failed ({type(exc).__name__}: {_clip(str(exc))})"


def _unwritable(ref: Ref, exc: Exception) -> ReferenceResolutionError:
    text = str(exc)
    if isinstance(exc, RecursionError):
        why = "it is nested too deeply to write as text"
    elif "Circular reference" in text:
        why = "it contains itself"
    elif "integer string conversion" in text:
        why = f"it holds an integer with more than {MAX_INT_DIGITS:,} digits"
    else:
        why = f"writing it {_failed(exc)}"
    return ReferenceResolutionError(
        f"{ref[3]!r} cannot be inserted into text: the value from step {ref[1]!r} cannot be written as JSON "
        f"text: {why}. Insert it as a whole value (an argument that is exactly '$ref:{ref[1]}...'), or make "
        f"{ref[1]!r} return plain JSON data.",
        reference=ref[3],
        source_step=ref[1],
    )


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"
