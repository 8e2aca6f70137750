"""The tools of the service tests (also loaded by `toolplan serve --tools` in a subprocess).

``gate`` waits until a file named after its argument exists in $SVC_GATES (the test opens the gate);
``charge`` appends a line to $SVC_LEDGER (a side effect that must never happen twice).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from toolplan import tool


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool(read_only=True)
async def gate(name: str) -> str:
    """Wait until the test opens the gate ``name``."""
    path = Path(os.environ["SVC_GATES"]) / name
    while not path.exists():  # noqa: ASYNC110 - the gate is a file another process may open
        await asyncio.sleep(0.01)
    return f"passed {name}"


@tool
def charge(amount: int) -> str:
    """Charge ``amount`` (recorded in the ledger)."""
    with open(os.environ["SVC_LEDGER"], "a", encoding="utf-8") as f:
        f.write(f"{amount}\n")
    return f"charged {amount}"


@tool(read_only=True, idempotent=True, timeout=0.05)
def late_failure() -> str:
    """A read that times out, then fails in its thread (while a retry waits for that thread)."""
    time.sleep(0.2)
    raise ValueError("late failure")


TOOLS = [add, gate, charge, late_failure]
