"""What the schedule tests share (a module of its own: conftest names clash across folders)."""

from __future__ import annotations

from toolplan import tool

__all__ = ("T0", "Clock", "add")

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
