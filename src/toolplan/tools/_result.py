from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._records import fast_init

__all__ = ("ToolResult", "owned")


@fast_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call.

    ``error`` set means a *business* error (a city that does not exist, a record that is locked):
    the call completed but did not succeed, and its step fails. Exceptions raised by a tool are
    *infrastructure* errors and are reported as such. Never signal an error by a string prefix.
    """

    content: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None

    @classmethod
    def failure(cls, message: str, content: Any = None) -> ToolResult:
        """A business error with a message the model can act on."""
        return cls(content=content, error=message)


_IMMUTABLE = frozenset((str, int, float, bool, type(None), bytes))


def owned(value: Any) -> Any:
    """A copy of ``value`` that shares no mutable object with it (JSON data is copied fast).

    What a tool returns it may keep and change later (a stateful service's list); a step's output
    must not change once the step ended. Dicts and lists are copied without recursion (any depth;
    a cycle stays a cycle), other objects with `copy.deepcopy` (kept as they are if that fails).
    """
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is not dict and kind is not list:
        return _deepcopy(value)
    memo: dict[int, Any] = {}
    root: Any = {} if kind is dict else []
    memo[id(value)] = root
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, copied = stack.pop()
        if type(source) is dict:
            for key, item in source.items():
                copied[key] = item if type(item) in _IMMUTABLE else _copy_child(item, memo, stack)
        else:
            append = copied.append
            for item in source:
                append(item if type(item) in _IMMUTABLE else _copy_child(item, memo, stack))
    return root


def _copy_child(item: Any, memo: dict[int, Any], stack: list[tuple[Any, Any]]) -> Any:
    kind = type(item)
    if kind is dict or kind is list:
        copied = memo.get(id(item))
        if copied is None:
            copied = memo[id(item)] = {} if kind is dict else []
            stack.append((item, copied))
        return copied
    return _deepcopy(item)


def _deepcopy(value: Any) -> Any:
    import copy

    try:
        return copy.deepcopy(value)
    except Exception:  # an object that cannot be copied (a lock, a socket; nested too deep): kept as it is
        return value
