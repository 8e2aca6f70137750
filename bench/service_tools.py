"""The tool of ``python -m bench service``, loaded by the ``toolplan serve`` it starts (``--tools``)."""

from __future__ import annotations

from toolplan import tool


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


TOOLS = [add]
