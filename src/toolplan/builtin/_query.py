"""A bounded JMESPath evaluator: a query stops when a value it builds grows too large or its time is up.

JMESPath has no loops, but a short expression can still multiply data: each ``[@, @, @]`` repeats
what it is given, each ``[]`` then copies it out, and a pipe of a dozen such stages over ten
numbers asks for billions of values. The bounds are checked while the query runs, not after:

- **items**: no value the query builds may hold more than ``max_items`` JSON values (numbers,
  strings, objects, arrays, each counted where it appears: a part repeated ten times counts ten
  times) beyond the size of its input, and the values it builds in all may not exceed four times
  that (the work of a projection that makes and drops many small values);
- **chars**: no value may hold more than ``max_chars`` characters of strings beyond its input's;
- **time**: every step of the evaluation looks at the clock, so a query past its deadline (its own
  ``seconds``, or the call's deadline when earlier, or the call given up) stops where it is.

A query that hits a bound ends with `QueryBoundError`, which names the bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .._context import current_call_or_none

__all__ = ("QueryBoundError", "QueryLimits", "bounded_interpreter")

# Node types whose result is a new value (the others return a part of their input, or a bool).
_BUILDING = frozenset(
    {
        "multi_select_list",
        "multi_select_dict",
        "flatten",
        "projection",
        "value_projection",
        "filter_projection",
        "function_expression",
        "slice",
    }
)


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """The bounds of one data-tool call (every query it runs shares them)."""

    max_items: int
    max_chars: int
    seconds: float


class QueryBoundError(Exception):
    """A query hit a bound; ``bound`` names it: ``max_query_items``, ``max_query_chars`` or ``query_timeout``."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound


class _Over(Exception):
    """A value passed a bound (before the input's own size was allowed for, or after)."""

    def __init__(self, bound: str, reached: int) -> None:
        self.bound = bound
        self.reached = reached


class _Meter:
    """What a call's queries have built so far, against its limits.

    The input's own size is added to the limits only when a value first passes them (a query may
    return all it was given): most calls never pay for measuring their input.
    """

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        # id -> (the value, kept alive so that its id stays its own; items; chars), for containers that
        # hold containers or 32 values or more: a repeated part is measured once (a small flat one is
        # measured again where it appears, which costs less than remembering it).
        self._memo: dict[int, tuple[Any, int, int]] = {}
        self.max_items = limits.max_items
        self.max_chars = limits.max_chars
        self.built = 0
        self.max_built = 4 * limits.max_items
        self._inputs: list[Any] = []  # what the call was given, until its size is allowed for
        self.deadline = time.monotonic() + limits.seconds
        call = current_call_or_none()
        if call is not None and call.deadline is not None:
            self.deadline = min(self.deadline, call.deadline)
        self._call = call

    def given(self, data: Any) -> None:
        """``data`` is the call's input: values as large as it are allowed beyond the limits."""
        self._inputs.append(data)

    def tick(self) -> None:
        if time.monotonic() > self.deadline or (self._call is not None and self._call.cancelled):
            raise QueryBoundError(
                "query_timeout",
                f"The query was stopped after {self.limits.seconds:g} s (query_timeout, or the call's own deadline). "
                "Ask for less: filter or slice the data before projecting it.",
            )

    def check(self, value: Any) -> None:
        """Refuse ``value`` (just built) when it is too large, or when the call has built too much in all."""
        try:
            self._check(value)
        except _Over:
            if not self._inputs:
                raise self._error(*self._last) from None
            self._allow_inputs()
            try:
                self._check(value)
            except _Over:
                raise self._error(*self._last) from None

    def _check(self, value: Any) -> None:
        if isinstance(value, str):
            if len(value) > self.max_chars:
                self._over("max_query_chars", len(value))
            return
        if not isinstance(value, list | dict) or id(value) in self._memo:
            return
        if self.built + len(value) > self.max_built:
            self._over("built", self.built + len(value))
        self.built += len(value)
        self.size(value)

    def _allow_inputs(self) -> None:
        inputs, self._inputs = self._inputs, []
        max_items, max_chars, self.max_items, self.max_chars = self.max_items, self.max_chars, 1 << 62, 1 << 62
        items = chars = 0
        for data in inputs:
            if isinstance(data, list | dict):
                i, c = self.size(data)
            else:
                i, c = 1, len(data) if isinstance(data, str) else 0
            items += i
            chars += c
        self.max_items, self.max_chars = max_items + items, max_chars + chars
        self.max_built += items

    def _over(self, bound: str, reached: int) -> None:
        self._last = (bound, reached)
        raise _Over(bound, reached)

    def size(self, value: list[Any] | dict[str, Any]) -> tuple[int, int]:
        """``(JSON values, string characters)`` of a list or object, a repeated part counted each time; bounded."""
        hit = self._memo.get(id(value))
        if hit is not None:
            return hit[1], hit[2]
        items, chars = len(value) + 1, 0
        children: Any = value
        if isinstance(value, dict):
            children = value.values()
            try:
                chars = sum(map(len, value))
            except TypeError:  # keys that are not text (data made in Python): counted as values
                chars = 0
        nested = False
        for child in children:
            if child.__class__ is str:
                chars += len(child)
            elif isinstance(child, list | dict):
                nested = True
                i, c = self.size(child)
                items += i - 1
                chars += c
                if items > self.max_items:
                    self._over("max_query_items", items)
                if chars > self.max_chars:
                    self._over("max_query_chars", chars)
            elif isinstance(child, str):
                chars += len(child)
        if items > self.max_items:
            self._over("max_query_items", items)
        if chars > self.max_chars:
            self._over("max_query_chars", chars)
        if nested or len(value) >= 32:
            self._memo[id(value)] = (value, items, chars)
        return items, chars

    def _error(self, bound: str, reached: int) -> QueryBoundError:
        limits = self.limits
        if bound == "built":
            return QueryBoundError(
                "max_query_items",
                f"The query built more than {self.max_built} values in all (4 x max_query_items={limits.max_items}, "
                "beyond its input). Ask for less: filter or slice the data before projecting it.",
            )
        if bound == "max_query_items":
            return QueryBoundError(
                bound,
                f"The query built a value of more than {self.max_items} JSON values (max_query_items="
                f"{limits.max_items} beyond its input; it reached {reached} and was stopped). Ask for less: filter or "
                "slice the data, or select fields, instead of repeating it.",
            )
        return QueryBoundError(
            bound,
            f"The query built a value of more than {self.max_chars} characters of text (max_query_chars="
            f"{limits.max_chars} beyond its input; it reached {reached} and was stopped). Ask for less text.",
        )


def bounded_interpreter(jmespath: Any, limits: QueryLimits) -> Any:
    """A JMESPath tree interpreter for one call: ``interpreter.run(parsed, data)`` evaluates under ``limits``."""

    class Bounded(jmespath.visitor.TreeInterpreter):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.meter = _Meter(limits)
            self.visits = 0

        def run(self, parsed: Any, data: Any) -> Any:
            return self.visit(parsed.parsed, data)

        def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            self.visits += 1
            if not self.visits & 31:  # the clock every 32 steps: each step's own work is bounded
                self.meter.tick()
            kind = node["type"]
            method = self._method_cache.get(kind)  # Visitor.visit, inlined (one frame less per step)
            if method is None:
                method = self._method_cache[kind] = getattr(self, f"visit_{kind}", self.default_visit)
            result = method(node, *args, **kwargs)
            if kind in _BUILDING:
                self.meter.check(result)
            return result

    return Bounded()
