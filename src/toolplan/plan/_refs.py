"""References between steps: ``"$ref:ID.path"`` whole values and ``{{ID.path}}`` templates.

Arguments are compiled once into a small tree (`compile_arguments`) and resolved per run
(`resolve`). Resolution walks the compiled tree only, so values inserted by a reference are never
scanned for references again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, cast

from .._records import fast_init, maker
from ._ir import MissingField

__all__ = (
    "ArgumentCompiler",
    "Compiled",
    "Ref",
    "Template",
    "compile_arguments",
    "get_path",
    "parse_path",
    "resolve",
)

REF_PREFIX = "$ref:"
ESCAPED_PREFIX = "$$ref:"
TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_ID_RE = re.compile(r"[A-Za-z0-9_-]+")
_SEGMENT_RE = re.compile(r"\.([^.\[\]]+)|\[\s*(-?\d+)\s*\]")
_INLINE_REF_RE = re.compile(r"(?<!\$)\$ref:([A-Za-z0-9_-]+)")

Segment = str | int


@fast_init
@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to step ``step``'s output, or to the field at ``path`` inside it."""

    step: str
    path: tuple[Segment, ...]
    text: str  # as written, for messages and for 'keep' mode


@fast_init
@dataclass(frozen=True, slots=True)
class Template:
    """A string with ``{{...}}`` parts interpolated at run time."""

    parts: tuple[str | Ref, ...]


# Inside _Dict and _List an item is a compiled node (Ref, Template, _Dict, _List) or, when it holds
# no reference, the plain literal value itself.


@fast_init
@dataclass(frozen=True, slots=True)
class _Dict:
    items: tuple[tuple[str, Any], ...]


@fast_init
@dataclass(frozen=True, slots=True)
class _List:
    items: tuple[Any, ...]


@fast_init
@dataclass(frozen=True, slots=True)
class Literal:
    """A value without references (kept as is)."""

    value: Any


Compiled = Ref | Template | _Dict | _List | Literal
# The compiler makes these per step: makers cost less than class calls (see toolplan._records).
_new_ref, _new_template, _new_dict, _new_list, _new_literal = (
    maker(Ref),
    maker(Template),
    maker(_Dict),
    maker(_List),
    maker(Literal),
)
# The compiled node types. A Literal only appears inside a tree when a node object was given as data.
_NODE_TYPES = frozenset({Ref, Template, _Dict, _List, Literal})


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


class ArgumentCompiler:
    """Compiles the arguments of a plan's steps; one instance serves every step of a plan.

    Inside a compiled tree a literal part is kept as a plain value, not wrapped in a node (only a
    whole literal argument object is wrapped in `Literal`); literal lists and dicts are copies.

    Args:
        step_ids: The ids a reference may name.
        warn: Called with ``(code, message)`` for each warning.
        error: Called with ``(code, message)`` for each error.
    """

    __slots__ = ("_ref_cache", "error_callback", "error_count", "refs", "step_ids", "warn")

    def __init__(
        self, step_ids: Collection[str], *, warn: Callable[[str, str], None], error: Callable[[str, str], None]
    ) -> None:
        self.step_ids = step_ids
        self.warn = warn
        self.error_callback = error
        self.error_count = 0
        self.refs: dict[str, None] = {}  # the steps referred to, in order of appearance
        self._ref_cache: dict[str, Ref] = {}  # "$ref:..." text -> Ref (refs are immutable; reuse them)

    def arguments(self, arguments: Mapping[str, Any]) -> tuple[Compiled, tuple[str, ...], frozenset[str]]:
        """Compile a step's arguments.

        Returns the compiled tree, the referenced step ids (in order of appearance) and the
        top-level argument names whose value contains a reference (known only at run time).
        """
        self.refs = {}
        deferred: list[str] = []
        items: list[tuple[str, Any]] = []
        for key, value in arguments.items():
            before = self.error_count
            c = self._compile(value)
            # A value holding a reference is only known at run time; so is one whose reference is
            # broken (already reported: checking its text against the schema would add a misleading error).
            if type(c) in _NODE_TYPES or self.error_count > before:
                deferred.append(key)
            items.append((key, c))
        if not deferred:
            return _new_literal(dict(items)), (), frozenset()
        return _new_dict(tuple(items)), tuple(self.refs), frozenset(deferred)

    def _error(self, code: str, message: str) -> None:
        self.error_count += 1
        self.error_callback(code, message)

    def _compile(self, value: Any) -> Any:
        """A compiled node, or the literal value.

        Containers are copied, so no tool ever receives (and may change) the plan's own lists and dicts.
        """
        kind = type(value)
        if kind is str or (kind is not dict and kind is not list and isinstance(value, str)):
            if "$" not in value and "{{" not in value:
                return value
            cached = self._ref_cache.get(value)  # the same "$ref:..." text again (a fan-in, a fan-out)
            if cached is not None:
                self.refs[cached.step] = None
                return cached
            return self._string(value)
        if kind is dict or isinstance(value, dict):
            mapping: dict[str, Any] = value  # (value is Any: no cast, which costs a call per use)
            pairs: list[tuple[str, Any]] = []
            node = False
            for k, v in mapping.items():
                c = self._compile(v)
                node = node or type(c) in _NODE_TYPES
                pairs.append((k, c))
            return _new_dict(tuple(pairs)) if node else dict(pairs)
        if kind is list or isinstance(value, list):
            sequence: list[Any] = value
            elems: list[Any] = []
            node = False
            for v in sequence:
                c = self._compile(v)
                node = node or type(c) in _NODE_TYPES
                elems.append(c)
            return _new_list(tuple(elems)) if node else elems
        if kind in _NODE_TYPES:  # one of these node objects given as data stays data
            return _new_literal(value)
        return value

    def _string(self, s: str) -> Any:
        if s.startswith(REF_PREFIX):
            m = _SIMPLE_REF_RE.match(s)
            parsed = (m.group(1), ()) if m is not None else parse_path(s[len(REF_PREFIX) :].strip())
            if parsed is None:
                self._error(
                    "invalid_reference",
                    f"{s!r} is not a valid reference. Write '$ref:STEP_ID' or '$ref:STEP_ID.field.0.sub' "
                    "(escape a literal '$ref:' as '$$ref:').",
                )
                return s
            step, path = parsed
            if step not in self.step_ids:
                self._error("unknown_reference", f"{s!r} refers to step {step!r}, which is not in the plan.")
                return s
            self.refs[step] = None
            ref = self._ref_cache[s] = _new_ref(step, path, s)
            return ref
        if s.startswith(ESCAPED_PREFIX):
            return s[1:]
        if "{{" in s:
            return self._template(s)
        if "$ref:" in s:
            for m in _INLINE_REF_RE.finditer(s):
                if m.group(1) in self.step_ids:
                    self.warn(
                        "inline_ref",
                        f"{s!r} contains '$ref:{m.group(1)}' inside other text, where it stays literal text. "
                        f"To insert the value write '{{{{{m.group(1)}}}}}' instead.",
                    )
                    break
        return s

    def _template(self, s: str) -> Any:
        parts: list[str | Ref] = []
        pos = 0
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
                parts.append(s[pos : m.start()])
            self.refs[parsed[0]] = None
            parts.append(_new_ref(parsed[0], parsed[1], m.group(0)))
            pos = m.end()
        if not any(isinstance(p, Ref) for p in parts):
            return s
        if pos < len(s):
            parts.append(s[pos:])
        if len(parts) == 1 and isinstance(parts[0], Ref):
            return parts[0]  # exactly one {{...}}: the value keeps its type
        return _new_template(tuple(parts))


def compile_arguments(
    arguments: Mapping[str, Any],
    step_ids: Collection[str],
    *,
    warn: Callable[[str, str], None],
    error: Callable[[str, str], None],
) -> tuple[Compiled, tuple[str, ...], frozenset[str]]:
    """Compile one step's arguments (see `ArgumentCompiler.arguments`)."""
    return ArgumentCompiler(step_ids, warn=warn, error=error).arguments(arguments)


_MISSING: Any = object()


def _maybe_json(value: Any) -> Any:
    # A tool output that is JSON text is parsed before field access.
    if isinstance(value, str):
        head = value.lstrip()[:1]
        if head in ("{", "["):
            try:
                return json.loads(value)
            except ValueError:
                return value
    return value


def get_path(value: Any, path: tuple[Segment, ...]) -> Any:
    """The value at ``path`` inside ``value``, or a sentinel when a segment is missing."""
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


def is_missing(value: Any) -> bool:
    """True for the sentinel `get_path` returns for a missing field."""
    return value is _MISSING


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
    """Build the concrete value of a compiled tree from the outputs of finished steps."""
    return resolve_compiled(compiled, outputs, missing == "null", on_missing)


def resolve_compiled(
    c: Compiled, outputs: Mapping[str, Any], null: bool, on_missing: Callable[[Ref], None] | None
) -> Any:
    """`resolve` with positional arguments (``null``: a missing field becomes None, else its text).

    The executor calls it once per step; keywords and the extra call of `resolve` cost more than
    resolving a typical step's arguments.
    """
    if isinstance(c, _Dict):  # isinstance narrows for the type checker; a cast would cost a call
        obj: dict[str, Any] = {}
        for k, v in c.items:
            t = type(v)
            if t is Ref and not v.path:
                obj[k] = outputs[v.step]  # a whole output: never missing (the step succeeded)
            elif t in _NODE_TYPES:
                obj[k] = resolve_compiled(v, outputs, null, on_missing)
            else:
                obj[k] = v
        return obj
    if isinstance(c, Ref):
        value = get_path(outputs[c.step], c.path) if c.path else outputs[c.step]
        if value is _MISSING:
            if on_missing is not None:
                on_missing(c)
            return None if null else c.text
        return value
    if isinstance(c, Literal):
        return c.value
    if isinstance(c, _List):
        seq: list[Any] = []
        for v in c.items:
            t = type(v)
            if t is Ref and not v.path:
                seq.append(outputs[v.step])
            elif t in _NODE_TYPES:
                seq.append(resolve_compiled(v, outputs, null, on_missing))
            else:
                seq.append(v)
        return seq
    chunks: list[str] = []
    for part in c.parts:
        if isinstance(part, str):
            chunks.append(part)
            continue
        v = get_path(outputs[part.step], part.path) if part.path else outputs[part.step]
        if v is _MISSING:
            if on_missing is not None:
                on_missing(part)
            chunks.append("null" if null else part.text)
        else:
            chunks.append(to_text(v))
    return "".join(chunks)
