"""A chain of no-op steps, for the tests of the store's write path."""

from __future__ import annotations

from typing import Any

from toolplan import tool


@tool
def step(prev: int) -> int:
    """One step of a chain."""
    return prev + 1


def chain(n: int) -> dict[str, Any]:
    """A plan of ``n`` `step` calls, each reading the one before."""
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "step", "arguments": {"prev": 0}}]
    steps += [{"id": f"s{i}", "tool": "step", "arguments": {"prev": f"$ref:s{i - 1}"}} for i in range(1, n)]
    return {"steps": steps}
