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

from ._ir import MissingField

__all__ = (
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


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to step ``step``'s output, or to the field at ``path`` inside it."""

    step: str
    path: tuple[Segment, ...]
    text: str  # as written, for messages and for 'keep' mode


@dataclass(frozen=True, slots=True)
class Template:
    """A string with ``{{...}}`` parts interpolated at run time."""

    parts: tuple[str | Ref, ...]


@dataclass(frozen=True, slots=True)
class _Dict:
    items: tuple[tuple[str, Compiled], ...]


@dataclass(frozen=True, slots=True)
class _List:
    items: tuple[Compiled, ...]


@dataclass(frozen=True, slots=True)
class Literal:
    """A value without references (kept as is)."""

    value: Any


Compiled = Ref | Template | _Dict | _List | Literal


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


@dataclass(slots=True)
class _Compiler:
    step_ids: Collection[str]
    warn: Callable[[str, str], None]  # (code, message)
    error: Callable[[str, str], None]
    refs: set[str]

    def compile(self, value: Any) -> Compiled:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, dict):
            items = tuple((k, self.compile(v)) for k, v in cast(dict[str, Any], value).items())
            if all(isinstance(c, Literal) for _, c in items):
                return Literal({k: c.value for k, c in items if isinstance(c, Literal)})
            return _Dict(items)
        if isinstance(value, list):
            elems = tuple(self.compile(v) for v in value)
            if all(isinstance(c, Literal) for c in elems):
                return Literal([c.value for c in elems if isinstance(c, Literal)])
            return _List(elems)
        return Literal(value)

    def _string(self, s: str) -> Compiled:
        if s.startswith(ESCAPED_PREFIX):
            return Literal(s[1:])
        if s.startswith(REF_PREFIX):
            parsed = parse_path(s[len(REF_PREFIX) :].strip())
            if parsed is None:
                self.error(
                    "invalid_reference",
                    f"{s!r} is not a valid reference. Write '$ref:STEP_ID' or '$ref:STEP_ID.field.0.sub' "
                    "(escape a literal '$ref:' as '$$ref:').",
                )
                return Literal(s)
            step, path = parsed
            if step not in self.step_ids:
                self.error("unknown_reference", f"{s!r} refers to step {step!r}, which is not in the plan.")
                return Literal(s)
            self.refs.add(step)
            return Ref(step, path, s)
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
        return Literal(s)

    def _template(self, s: str) -> Compiled:
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
            self.refs.add(parsed[0])
            parts.append(Ref(parsed[0], parsed[1], m.group(0)))
            pos = m.end()
        if not any(isinstance(p, Ref) for p in parts):
            return Literal(s)
        if pos < len(s):
            parts.append(s[pos:])
        if len(parts) == 1 and isinstance(parts[0], Ref):
            return parts[0]  # exactly one {{...}}: the value keeps its type
        return Template(tuple(parts))


def compile_arguments(
    arguments: Mapping[str, Any],
    step_ids: Collection[str],
    *,
    warn: Callable[[str, str], None],
    error: Callable[[str, str], None],
) -> tuple[Compiled, frozenset[str], frozenset[str]]:
    """Compile a step's arguments.

    Returns the compiled tree, the referenced step ids and the top-level argument names whose
    value contains a reference (their values are only known at run time).
    """
    errors = 0

    def counted_error(code: str, message: str) -> None:
        nonlocal errors
        errors += 1
        error(code, message)

    compiler = _Compiler(step_ids, warn, counted_error, set())
    deferred: set[str] = set()
    items: list[tuple[str, Compiled]] = []
    for key, value in arguments.items():
        before = errors
        c = compiler.compile(value)
        # A value holding a reference is only known at run time; so is one whose reference is broken
        # (already reported: checking its text against the schema would add a misleading error).
        if not isinstance(c, Literal) or errors > before:
            deferred.add(key)
        items.append((key, c))
    if deferred:
        compiled: Compiled = _Dict(tuple(items))
    else:
        compiled = Literal({k: c.value for k, c in items if isinstance(c, Literal)})
    return compiled, frozenset(compiler.refs), frozenset(deferred)


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
    if isinstance(compiled, Literal):
        return compiled.value
    if isinstance(compiled, Ref):
        value = get_path(outputs[compiled.step], compiled.path) if compiled.path else outputs[compiled.step]
        if value is _MISSING:
            if on_missing is not None:
                on_missing(compiled)
            return None if missing == "null" else compiled.text
        return value
    if isinstance(compiled, Template):
        chunks: list[str] = []
        for part in compiled.parts:
            if isinstance(part, str):
                chunks.append(part)
            else:
                v = get_path(outputs[part.step], part.path) if part.path else outputs[part.step]
                if v is _MISSING:
                    if on_missing is not None:
                        on_missing(part)
                    chunks.append("null" if missing == "null" else part.text)
                else:
                    chunks.append(to_text(v))
        return "".join(chunks)
    if isinstance(compiled, _Dict):
        return {k: resolve(c, outputs, missing=missing, on_missing=on_missing) for k, c in compiled.items}
    return [resolve(c, outputs, missing=missing, on_missing=on_missing) for c in compiled.items]
