"""The file tools and plan the approval tests share: a lookup, a destructive delete, a notification."""

from __future__ import annotations

from typing import Any

from toolplan import tool

__all__ = ("CALLS", "PLAN", "TOOLS", "delete", "find", "notify")

CALLS: list[tuple[str, Any]] = []


@tool(read_only=True)
def find(name: str) -> dict[str, Any]:
    """Look a file up."""
    CALLS.append(("find", name))
    return {"path": f"/tmp/{name}", "size": len(name)}


@tool(destructive=True)
def delete(path: str) -> str:
    """Delete a file."""
    CALLS.append(("delete", path))
    return f"deleted {path}"


@tool
def notify(message: str) -> str:
    """Send a message."""
    CALLS.append(("notify", message))
    return "sent"


TOOLS = [find, delete, notify]

PLAN = {
    "steps": [
        {"id": "f", "tool": "find", "arguments": {"name": "a.txt"}},
        {"id": "d", "tool": "delete", "arguments": {"path": "$ref:f.path"}, "rationale": "free space"},
        {"id": "n", "tool": "notify", "arguments": {"message": "{{d}}"}},
        {"id": "g", "tool": "find", "arguments": {"name": "b.txt"}},
    ]
}
