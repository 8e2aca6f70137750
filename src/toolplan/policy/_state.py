"""The execution state of a declared plan, as the ACP proposal names it: Planned, InProgress, Complete, Failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

__all__ = ("EXECUTION_STATES", "ExecutionState", "StateName", "parse_state")

#: The states of a declared plan, as the ACP proposal names them.
StateName: TypeAlias = Literal["Planned", "InProgress", "Complete", "Failed"]
EXECUTION_STATES: tuple[StateName, ...] = ("Planned", "InProgress", "Complete", "Failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionState:
    """Where a declared plan is.

    ``Planned``, ``InProgress`` (``completed`` calls so far), ``Complete``, or ``Failed`` (with the ``reason``).
    """

    state: StateName = "Planned"
    completed: int = 0
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"state", "completed"}``, and ``"reason"`` when it failed."""
        out: dict[str, Any] = {"state": self.state, "completed": self.completed}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def __str__(self) -> str:
        if self.state == "InProgress":
            return f"InProgress ({self.completed} completed)"
        return f"Failed: {self.reason}" if self.state == "Failed" and self.reason else self.state


def parse_state(raw: Any) -> tuple[ExecutionState, str | None]:
    """``executionState``: ``"InProgress"``, ``{"state": "Failed", "reason": ...}`` or ``{"InProgress": {...}}``.

    Returns the state and, when ``raw`` is none of these, what is wrong (the state is then ``Planned``).
    """
    if raw is None:
        return ExecutionState(), None
    name: Any = raw
    body: dict[str, Any] = {}
    if isinstance(raw, dict) and len(raw) == 1 and isinstance(next(iter(raw.values())), dict):
        name, body = next(iter(cast(dict[str, Any], raw).items()))
    elif isinstance(raw, dict):
        body = cast(dict[str, Any], raw)
        name = body.get("state")
    by_word = {s.lower().replace("_", ""): s for s in EXECUTION_STATES}
    state = by_word.get(name.lower().replace("_", "")) if isinstance(name, str) else None
    completed, reason = body.get("completed", 0), body.get("reason")
    if (
        state is None
        or not (isinstance(completed, int) and not isinstance(completed, bool) and completed >= 0)
        or not (reason is None or isinstance(reason, str))
    ):
        return ExecutionState(), (
            f"'executionState' must be one of {', '.join(EXECUTION_STATES)} (or an object "
            '{"state": ..., "completed": <calls done>, "reason": "..."}), '
            f"got {raw!r:.80}."
        )
    return ExecutionState(state=state, completed=completed, reason=reason), None
