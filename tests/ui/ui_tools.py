"""The tools of the live-view tests (also loaded by ``toolplan run --tools`` in a subprocess).

``gate`` waits until the test opens the gate: a file named after its argument in $UI_GATES.
``gate_fail`` waits the same way, then fails with a business error.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from toolplan import ToolError, tool


async def _wait(name: str) -> None:
    path = Path(os.environ["UI_GATES"]) / name
    while not path.exists():  # noqa: ASYNC110 - the gate is a file the test (another process) opens
        await asyncio.sleep(0.01)


@tool(read_only=True)
async def gate(name: str) -> dict[str, Any]:
    """Wait until the test opens the gate ``name``."""
    await _wait(name)
    return {"gate": name, "passed": True}


@tool(read_only=True)
async def gate_fail(name: str, message: str) -> str:
    """Wait until the test opens the gate ``name``, then fail with ``message``."""
    await _wait(name)
    raise ToolError(message)


@tool(read_only=True)
def combine(parts: list[Any]) -> dict[str, Any]:
    """Put results together."""
    return {"parts": len(parts), "ok": True}


TOOLS = [gate, gate_fail, combine]
