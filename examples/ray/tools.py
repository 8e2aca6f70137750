"""The example's tools. Ray workers import them by name, so they live in a module of their own."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from toolplan import current_call, tool

PAGES = {
    "ray": "Ray runs Python functions as tasks and actors across a cluster of machines.",
    "toolplan": "toolplan runs the tool calls of one model turn as a dependency graph.",
}


@tool(read_only=True)
async def fetch_page(topic: str) -> dict[str, str]:
    """Fetch a page about ``topic`` (I/O-bound: runs on one of the backend's async actors)."""
    await asyncio.sleep(0.05)  # stands in for an HTTP request
    return {"topic": topic, "text": PAGES.get(topic, ""), "worker_pid": str(os.getpid())}


@tool(read_only=True)
def word_count(text: str) -> int:
    """Count words (CPU-bound: listed in ``cpu_tools``, so each call is a Ray task)."""
    return len(text.split())


@tool
def save_report(path: str, counts: list[int]) -> str:
    """Write the report (a side effect: not read-only, not idempotent, so never retried by toolplan)."""
    key = current_call().idempotency_key  # the same on the worker as in process
    Path(path).write_text(f"{key}: {sum(counts)} words\n", encoding="utf-8")
    return path


TOOLS = [fetch_page, word_count, save_report]
