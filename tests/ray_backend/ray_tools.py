"""Tools of the backend conformance suite, importable by name on Ray workers.

They keep what they observe in files under a directory the test passes in, because a tool running on
a Ray worker shares no memory with the test: the files are the "external ledger".
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from toolplan import ToolError, current_call, tool


@tool(read_only=True)
def weather(city: str) -> dict[str, Any]:
    """A city's weather."""
    return {"city": city, "temp": len(city) * 3, "tags": ["a", city.lower()]}


@tool
def compare(a: Any, b: Any, note: str = "") -> dict[str, Any]:
    """Compare two values."""
    return {"a": a, "b": b, "note": note}


@tool
def explode(message: str) -> str:
    """Raise an unexpected exception."""
    raise ValueError(message)


@tool
def refuse(message: str) -> str:
    """Fail with a business error."""
    raise ToolError(message)


@tool
def whoami() -> dict[str, Any]:
    """The call context as the tool sees it."""
    call = current_call()
    return {
        "run_id": call.run_id,
        "step_id": call.step_id,
        "attempt": call.attempt,
        "key": call.idempotency_key,
        "has_deadline": call.deadline is not None,
    }


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record) + "\n")


def ledger(path: str) -> list[dict[str, Any]]:
    """The records a tool appended to ``path`` (empty if none)."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]


@tool(idempotent=True, retry=3)
def flaky(ledger_path: str, fail_times: int) -> dict[str, Any]:
    """Fail ``fail_times`` times (counted in the ledger, by idempotency key), then succeed."""
    call = current_call()
    path = Path(ledger_path)
    _append(path, {"key": call.idempotency_key, "attempt": call.attempt})
    seen = sum(1 for r in ledger(ledger_path) if r["key"] == call.idempotency_key)
    if seen <= fail_times:
        raise ConnectionError(f"attempt {call.attempt} failed")
    return {"attempt": call.attempt, "key": call.idempotency_key}


@tool
async def hang(marker_dir: str) -> str:
    """Wait forever; write ``started`` and, when cancelled, ``cancelled`` in ``marker_dir``."""
    d = Path(marker_dir)
    (d / "started").write_text(str(os.getpid()))
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        (d / "cancelled").write_text(str(os.getpid()))
        raise
    return "never"


@tool(concurrency=2)
async def limited(counter_path: str, hold: float) -> int:
    """Count calls running at once in ``counter_path`` (the most seen is kept); returns this pid."""
    path = Path(counter_path)
    _bump(path, +1)
    await asyncio.sleep(hold)
    _bump(path, -1)
    return os.getpid()


def _bump(path: Path, delta: int) -> None:
    with path.open("a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        state = json.loads(text) if text else {"now": 0, "most": 0}
        state["now"] += delta
        state["most"] = max(state["most"], state["now"])
        f.seek(0)
        f.truncate()
        f.write(json.dumps(state))


def _block_after_effect(ledger_path: str, pid_path: str) -> dict[str, Any]:
    call = current_call()
    _append(Path(ledger_path), {"key": call.idempotency_key, "attempt": call.attempt, "pid": os.getpid()})
    if call.attempt == 1:  # the first attempt waits to be killed (the test kills this process)
        Path(pid_path).write_text(str(os.getpid()))
        while True:  # ended by the signal; a test without a kill would hit its timeout
            time.sleep(0.05)
    return {"attempt": call.attempt}


@tool
def charge(ledger_path: str, pid_path: str) -> dict[str, Any]:
    """A side effect (recorded in the ledger) that is not safe to repeat, then a long wait."""
    return _block_after_effect(ledger_path, pid_path)


@tool
def charge_cpu(ledger_path: str, pid_path: str) -> dict[str, Any]:
    """`charge`, run as a Ray task (the suite lists it in ``cpu_tools``)."""
    return _block_after_effect(ledger_path, pid_path)


@tool(idempotent=True, retry=2)
def lookup(ledger_path: str, pid_path: str) -> dict[str, Any]:
    """An idempotent call (recorded in the ledger) that waits on its first attempt."""
    return _block_after_effect(ledger_path, pid_path)


@tool
def burn(n: int) -> int:
    """Pure-Python CPU work."""
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


@tool
def trace_parent() -> str:
    """The trace id the tool's own spans join (hex), or "" outside a trace."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


TOOLS = [
    weather,
    compare,
    explode,
    refuse,
    whoami,
    flaky,
    hang,
    limited,
    charge,
    charge_cpu,
    lookup,
    burn,
    trace_parent,
]
