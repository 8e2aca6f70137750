"""The tool of ``python -m bench replicas``, loaded by each ``toolplan serve`` it starts (``--tools``).

``add`` is `bench.service_tools`' tool with a side effect: each call appends ``a b`` to a file of its
process in ``$TOOLPLAN_BENCH_CALLS`` (``calls-PID.txt``). The bench's plans never make the same call
twice, so a line seen twice is an execution (or a step) run twice, and the files say which process
ran which.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from toolplan import tool

_lock = threading.Lock()


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers (and record the call)."""
    path = Path(os.environ["TOOLPLAN_BENCH_CALLS"]) / f"calls-{os.getpid()}.txt"
    with _lock, path.open("a", encoding="utf-8") as f:
        f.write(f"{a} {b}\n")
    return a + b


TOOLS = [add]
