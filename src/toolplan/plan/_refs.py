"""References between steps: ``"$ref:ID.path"`` whole values and ``{{ID.path}}`` templates.

Arguments are compiled once into a small tree (`compile_arguments`, here) and resolved per run
(`resolve`, in `._resolve`). Resolution walks the compiled tree only, so values inserted by a
reference are never scanned for references again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .._json import MAX_DEPTH
from ._ops import (
    MAX_EXPRESSION_DEPTH,
    MAX_EXPRESSION_NODES,
    OP_KEY,
    OPERATORS,
    Type,
    static_problem,
    type_of,
)

__all__ = (
    "DICT",
    "EXPR",
    "LIST",
    "LITERAL",
    "REF",
    "TEMPLATE",
    "ArgumentCompiler",
    "Compiled",
    "Ref",
    "compile_arguments",
    "is_literal",
    "literal",
    "parse_path",
    "unescape",
)

REF_PREFIX = "$ref:"
ESCAPED_PREFIX = "$$ref:"
TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_ID_RE = re.compile(r"[A-Za-z0-9_-]+")
_SEGMENT_RE = re.compile(r"\.([^.\[\]]+)|\[\s*(-?\d+)\s*\]")
_INLINE_REF_RE = re.compile(r"(?<!\$)\$ref:([A-Za-z0-9_-]+)")

Segment = str | int


# A compiled argument tree is made of plain tuples tagged by their first item, plus the literal
# values themselves:
#
#   (REF, step, path, text)     step's output, or the field at ``path`` (a tuple of segments) inside
#                               it; ``text`` is the reference as written, for messages and 'keep' mode
#   (TEMPLATE, *parts)          a string with ``{{...}}`` parts: strings and REF nodes
#   (DICT, k1, item1, k2, ...)  a dict holding a reference: each key followed by its item
#   (LIST, *items)              a list holding a reference
#   (LITERAL, value)            a value without references; inside a tree only a literal tuple is
#                               wrapped (any other item without references is the value itself)
#   (EXPR, op, *operands)       an expression ``{"$op": op, "args": [...]}`` (see ``._ops``): its
#                               operands are nodes or literal values, like the items of a LIST
#
# Why flat tuples: they cost less to build and to read than slotted records or nested pairs, and
# CPython stops tracking a tuple in its garbage collector once everything in it is untracked
# (strings, numbers, such tuples). Each one made still counts towards the collector's next young
# collection, so a node is one tuple, not a tuple of pairs. A compiled plan keeps its arguments
# until it ends; made of references and JSON scalars, they drop out of the collections after the
# first few (docs/benchmarks.md, "Garbage collection at 10,000 steps").
REF, TEMPLATE, DICT, LIST, LITERAL, EXPR = range(6)

Ref = tuple[Any, ...]
"""A REF node: ``(REF, step, path, text)``."""
Compiled = tuple[Any, ...]
"""A compiled argument tree: one of the nodes above."""


def literal(value: Any) -> Compiled:
    """The compiled form of arguments without references."""
    return (LITERAL, value)


def is_literal(compiled: Compiled) -> bool:
    """The compiled arguments hold no reference: they are the values the tool gets."""
    return bool(compiled[0] == LITERAL)


def parse_path(expr: str) -> tuple[str, tuple[Segment, ...]] | None:
    """Split ``"ID.a.0[1][-1]"`` into ``("ID", ("a", "0", 1, -1))``; None if it is not a reference."""
    m = _ID_RE.match(expr)
    if not m:
        return None
    segments: list[Segment] = []
    pos = m.end()
    while pos < len(expr):
        sm = _SEGMENT_RE.match(expr, pos)
        if not sm:
            return None
        segments.append(sm.group(1) if sm.group(1) is not None else int(sm.group(2)))
        pos = sm.end()
    return m.group(0), tuple(segments)


_SIMPLE_REF_RE = re.compile(r"\$ref:\s*([A-Za-z0-9_-]+)\s*\Z")  # "$ref:ID": the common case, one match
_simple_ref = _SIMPLE_REF_RE.match
_NONE_DEFERRED: frozenset[str] = frozenset()


class ArgumentCompiler:
    """Compiles the arguments of a plan's steps; one instance serves every step of a plan.

    Inside a compiled tree a literal part is kept as a plain value, not wrapped in a node (only a
    literal tuple is wrapped, and a whole literal argument object); literal lists and dicts are copies.

    Args:
        step_ids: The ids a reference may name.
        warn: Called with ``(code, message)`` for each warning.
        error: Called with ``(code, message)`` for each error.
    """

    __slots__ = (
        "_in_expression",
        "_ref_cache",
        "_step_tools",
        "error_callback",
        "error_count",
        "output_schemas",
        "refs",
        "step_ids",
        "warn",
    )

    def __init__(
        self, step_ids: Collection[str], *, warn: Callable[[str, str], None], error: Callable[[str, str], None]
    ) -> None:
        self.step_ids = step_ids
        self.warn = warn
        self.error_callback = error
        self.error_count = 0
        self.refs: dict[str, None] = {}  # the steps referred to, in order of appearance
        self._ref_cache: dict[str, Ref] = {}  # "$ref:..." text -> its REF node (reused: a fan-in, a fan-out)
        self._in_expression = False  # compiling an expression's operands (its size is checked already)
        # Where an expression's references get their types: (the plan's steps, a registry), if known.
        self.output_schemas: tuple[Sequence[Any], Any] | None = None
        self._step_tools: dict[str, str] | None = None  # step id -> tool, made when first needed

    def arguments(self, arguments: Mapping[str, Any]) -> tuple[Compiled, tuple[str, ...], frozenset[str]]:
        """Compile a step's arguments.

        Returns the compiled tree, the referenced step ids (in order of appearance) and the
        top-level argument names whose value contains a reference (known only at run time).
        """
        self.refs = {}
        deferred: list[str] = []
        node: list[Any] = [DICT]  # the DICT node, if a value holds a reference
        wrapped = False
        for key, value in arguments.items():
            before = self.error_count
            c = self._compile(value, 1)
            # A value holding a reference is only known at run time; so is one whose reference is
            # broken (already reported: checking its text against the schema would add a misleading error).
            if type(c) is tuple:
                if c[0] != LITERAL:
                    deferred.append(key)
                else:
                    wrapped = True
            elif self.error_count > before:
                deferred.append(key)
            node.append(key)
            node.append(c)
        if not deferred:
            return (LITERAL, _literal_dict(node, wrapped)), (), _NONE_DEFERRED
        return tuple(node), tuple(self.refs), frozenset(deferred)

    def _error(self, code: str, message: str) -> None:
        self.error_count += 1
        self.error_callback(code, message)

    def _compile(self, value: Any, depth: int) -> Any:
        """A compiled node, or the literal value (``depth``: how many containers hold ``value``).

        Containers are copied, so no tool ever receives (and may change) the plan's own lists and dicts.
        A container deeper than `MAX_DEPTH` (a Python object; JSON text is bounded when parsed) is an
        error, not a `RecursionError`.
        """
        kind = type(value)
        if kind is str or (kind is not dict and kind is not list and isinstance(value, str)):
            if "$" not in value and "{{" not in value:
                return value
            cached = self._ref_cache.get(value)
            if cached is not None:
                self.refs[cached[1]] = None
                return cached
            return self._string(value)
        if kind is dict or (kind is not list and isinstance(value, dict)):
            if depth >= MAX_DEPTH:
                return self._too_deep(value)
            mapping: dict[str, Any] = value  # (value is Any: no cast, which costs a call per use)
            if OP_KEY in mapping:  # {"$op": ..., "args": [...]}: a computed value
                return self._expression(mapping, depth)
            items: list[Any] = [DICT]
            node = wrapped = False
            for k, v in mapping.items():
                c = self._compile(v, depth + 1)
                if type(c) is tuple:
                    if c[0] != LITERAL:
                        node = True
                    else:
                        wrapped = True
                items.append(k)
                items.append(c)
            if node:
                return tuple(items)
            return _literal_dict(items, wrapped)
        if kind is list or isinstance(value, list):
            if depth >= MAX_DEPTH:
                return self._too_deep(value)
            sequence: list[Any] = value
            elems: list[Any] = []
            node = wrapped = False
            for v in sequence:
                c = self._compile(v, depth + 1)
                if type(c) is tuple:
                    if c[0] != LITERAL:
                        node = True
                    else:
                        wrapped = True
                elems.append(c)
            if node:
                return (LIST, *elems)
            return [c[1] if type(c) is tuple else c for c in elems] if wrapped else elems
        if kind is tuple:  # a plain tuple inside a tree would read as a node
            return (LITERAL, value)
        return value

    def _expression(self, raw: dict[str, Any], depth: int) -> Any:
        """Compile ``{"$op": ..., "args": [...]}`` into an EXPR node (``raw`` itself after an error)."""
        if not self._in_expression:  # the whole expression: bounded before anything in it is compiled
            problem = _measure(raw)
            if problem is not None:
                self._error("invalid_expression", problem)
                return raw
        op, operands = raw.get(OP_KEY), raw.get("args")
        spec = OPERATORS.get(op) if isinstance(op, str) else None
        if spec is None:
            self._error(
                "invalid_expression",
                f'{_clip(op)} is not an operator. Write {{"$op": OP, "args": [...]}} with OP one of '
                f"{', '.join(OPERATORS)}.",
            )
            return raw
        if len(raw) != 2 or not isinstance(operands, list):
            self._error(
                "invalid_expression",
                f'An expression is exactly {{"$op": {op!r}, "args": [operands]}}, got keys '
                f"{', '.join(map(repr, raw))}{'' if isinstance(operands, list) else ' without an args list'}. "
                "Put the operands in 'args'.",
            )
            return raw
        args: list[Any] = operands
        n = len(args)
        if n < spec.min_args or (spec.max_args is not None and n > spec.max_args):
            want = (
                f"exactly {spec.min_args}"
                if spec.max_args == spec.min_args
                else f"{spec.min_args} or {spec.max_args}"
                if spec.max_args is not None
                else f"at least {spec.min_args}"
            )
            self._error(
                "invalid_expression",
                f"'{op}' ({spec.summary}) takes {want} operand{'' if want.endswith(' 1') else 's'}, got {n}.",
            )
            return raw
        outer = self._in_expression
        self._in_expression = True
        before = self.error_count
        try:
            compiled = [self._compile(a, depth + 1) for a in args]
        finally:
            self._in_expression = outer
        if self.error_count > before:  # an operand is wrong (reported): its type says nothing
            return raw
        if op == "exists":
            c = compiled[0]
            if type(c) is not tuple or c[0] != REF:
                self._error(
                    "invalid_expression",
                    "'exists' takes one reference, such as \"$ref:ID.field\" (it is true when that field is "
                    f"present and not null), got {_clip(args[0])}.",
                )
                return raw
        problem = static_problem(str(op), [self._type(c) for c in compiled])
        if problem is not None:
            self._error("invalid_expression", f"{problem}. Give '{op}' operands of the types it takes.")
            return raw
        return (EXPR, op, *compiled)

    def _type(self, c: Any) -> Type | None:
        """The JSON type of a compiled operand, where validation knows it (a reference's: from an output schema)."""
        if type(c) is not tuple or c[0] != REF:
            return _static_type(c)
        if self.output_schemas is None:
            return None
        steps, registry = self.output_schemas
        if self._step_tools is None:
            self._step_tools = {s.id: s.tool for s in steps}
        tool = self._step_tools.get(c[1])
        if tool is None or tool not in registry:
            return None
        return _schema_type(registry.definition(tool).output_json_schema, c[2])

    def condition(self, raw: Any) -> tuple[Any, tuple[str, ...]]:
        """Compile a step's ``when``: a reference, an expression or a boolean (None after an error)."""
        self.refs = {}
        if type(raw) is bool:
            return raw, ()
        before = self.error_count
        if isinstance(raw, str) or (isinstance(raw, dict) and OP_KEY in raw):
            c = self._compile(raw, 1)
            if type(c) is tuple and (c[0] == REF or c[0] == EXPR):
                return c, tuple(self.refs)
        if self.error_count == before:
            self._error(
                "invalid_condition",
                f"'when' must be a reference (\"$ref:ID.field\": the step runs when it is truthy) or an expression "
                f'such as {{"$op": "==", "args": ["$ref:ID.field", true]}}, got {_clip(raw)}.',
            )
        return None, ()

    def _too_deep(self, value: Any) -> Any:
        self._error(
            "invalid_arguments_json",
            f"The arguments hold values nested deeper than {MAX_DEPTH} levels (or a value that contains "
            f"itself). Nest values at most {MAX_DEPTH} levels deep.",
        )
        return value

    def _string(self, s: str) -> Any:
        m = _simple_ref(s)  # "$ref:ID", the common reference: one match, no other test
        if m is not None:
            step = m[1]
            if step in self.step_ids:
                self.refs[step] = None
                node = self._ref_cache[s] = (REF, step, (), s)
                return node
            self._error("unknown_reference", f"{s!r} refers to step {step!r}, which is not in the plan.")
            return s
        if s.startswith(REF_PREFIX):
            parsed = parse_path(s[len(REF_PREFIX) :].strip())
            if parsed is None:
                self._error(
                    "invalid_reference",
                    f"{s!r} is not a valid reference. Write '$ref:STEP_ID' or '$ref:STEP_ID.field.0.sub' "
                    f"(escape a literal '$ref:' as '$$ref:').{_formula_hint(s)}",
                )
                return s
            step, path = parsed
            if step not in self.step_ids:
                self._error("unknown_reference", f"{s!r} refers to step {step!r}, which is not in the plan.")
                return s
            self.refs[step] = None
            if " " in s and _formula_hint(s):  # "$ref:a.price * 3": a field named "price * 3"?
                self.warn(
                    "formula_reference",
                    f"{s!r} reads a field named {path[-1]!r}; no arithmetic happens inside a reference."
                    + _formula_hint(s),
                )
            ref = self._ref_cache[s] = (REF, step, path, s)
            return ref
        if REF_PREFIX in s:
            self._inline_refs(s)
        if "{{" in s:
            return self._template(s)
        return unescape(s)

    def _inline_refs(self, s: str) -> None:
        """Warn about an unescaped ``$ref:ID`` inside other text (it stays text) naming a step."""
        for m in _INLINE_REF_RE.finditer(s):
            if m.group(1) in self.step_ids:
                self.warn(
                    "inline_ref",
                    f"{s!r} contains '$ref:{m.group(1)}' inside other text, where it stays literal text. "
                    f"To insert the value write '{{{{{m.group(1)}}}}}' instead (or '$$ref:' for the text '$ref:').",
                )
                return

    def _template(self, s: str) -> Any:
        parts: list[Any] = []  # strings and REF nodes
        pos = 0
        found = False
        for m in TEMPLATE_RE.finditer(s):
            parsed = parse_path(m.group(1))
            if parsed is None or parsed[0] not in self.step_ids:
                self.warn(
                    "unresolved_template",
                    f"'{m.group(0)}' does not name a step of this plan, so it is kept as literal text. "
                    "If it should insert a step's output, write '{{STEP_ID.field}}' with an existing step id.",
                )
                continue
            if m.start() > pos:
                parts.append(unescape(s[pos : m.start()]))
            self.refs[parsed[0]] = None
            parts.append((REF, parsed[0], parsed[1], m.group(0)))
            found = True
            pos = m.end()
        if not found:
            return unescape(s)
        if pos < len(s):
            parts.append(unescape(s[pos:]))
        if len(parts) == 1:
            return parts[0]  # exactly one {{...}}: the value keeps its type
        parts.insert(0, TEMPLATE)
        return tuple(parts)


def unescape(text: str) -> str:
    """Literal text of a plan string: each ``$$ref:`` stands for ``$ref:`` (only text written in the plan)."""
    return text.replace(ESCAPED_PREFIX, REF_PREFIX) if ESCAPED_PREFIX in text else text


def _literal_dict(node: list[Any], wrapped: bool) -> dict[str, Any]:
    """The dict of a would-be DICT node without references; ``wrapped``: take literal tuples out of their nodes."""
    it = iter(node)
    next(it)  # the tag
    if wrapped:
        return {k: c[1] if type(c) is tuple else c for k, c in zip(it, it)}  # noqa: B905 (pairs)
    return dict(zip(it, it))  # noqa: B905 (pairs of key and value)


def compile_arguments(
    arguments: Mapping[str, Any],
    step_ids: Collection[str],
    *,
    warn: Callable[[str, str], None],
    error: Callable[[str, str], None],
) -> tuple[Compiled, tuple[str, ...], frozenset[str]]:
    """Compile one step's arguments (see `ArgumentCompiler.arguments`)."""
    return ArgumentCompiler(step_ids, warn=warn, error=error).arguments(arguments)


# -- expressions ------------------------------------------------------------------------------------


def _static_type(c: Any) -> Type | None:
    """The JSON type of a compiled operand, where validation knows it."""
    if type(c) is not tuple:
        return type_of(c)
    tag = c[0]
    if tag == EXPR:
        return OPERATORS[c[1]].result
    if tag == TEMPLATE:
        return "string"
    if tag == DICT:
        return "object"
    if tag == LIST:
        return "array"
    return None


_SCHEMA_TYPES: dict[str, Type] = {
    "integer": "number",
    "number": "number",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def _schema_type(schema: Any, path: tuple[Segment, ...]) -> Type | None:
    """The JSON type an output schema gives the value at ``path`` (None where it does not say plainly)."""
    for seg in path:
        if not isinstance(schema, Mapping):
            return None
        kind = schema.get("type")
        if kind == "object" and isinstance(seg, str):
            schema = (schema.get("properties") or {}).get(seg)
        elif kind == "array":
            schema = schema.get("items")
        else:
            return None  # text that may hold JSON, a union, a $ref: only the run can tell
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    return _SCHEMA_TYPES.get(kind) if isinstance(kind, str) else None


def _measure(raw: dict[str, Any]) -> str | None:
    """Why an expression is too big or too deeply nested, or None."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(raw, 1)]
    while stack:
        value, level = stack.pop()
        nodes += 1
        if nodes > MAX_EXPRESSION_NODES:
            return (
                f"An expression may hold at most {MAX_EXPRESSION_NODES} operators and operands. "
                "Split the computation over several steps or simplify it."
            )
        if isinstance(value, dict):
            mapping: dict[str, Any] = value
            if OP_KEY in mapping:
                if level > MAX_EXPRESSION_DEPTH:
                    return (
                        f"An expression may nest operators at most {MAX_EXPRESSION_DEPTH} levels deep. "
                        "Split the computation over several steps or simplify it."
                    )
                operands = mapping.get("args")
                if isinstance(operands, list):
                    items: list[Any] = operands
                    stack.extend((a, level + 1) for a in items)
            else:
                stack.extend((v, level) for v in mapping.values())
        elif isinstance(value, list):
            seq: list[Any] = value
            stack.extend((v, level) for v in seq)
    return None


def _clip(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


_FORMULA_CHARS = frozenset("+-*/<>=%")


def _formula_hint(s: str) -> str:
    """For a reference followed by a formula: how to write a computed value (else "")."""
    if not _FORMULA_CHARS.intersection(s.partition(" ")[2]):
        return ""
    return (
        ' For a computed value write an expression, e.g. {"$op": "*", "args": ["$ref:ID.price", 3]} '
        "(operators: " + ", ".join(OPERATORS) + ")."
    )
