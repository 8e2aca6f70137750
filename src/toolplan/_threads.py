"""Run blocking callables off the event loop, on one shared, lazily created thread pool."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ("run_in_thread",)

P = ParamSpec("P")
R = TypeVar("R")

# Sized for I/O-bound tools: plans run up to 20 steps at once by default and several plans may
# share a process. The default asyncio executor (min(32, cpus + 4) threads) would silently cap a
# plan of sync tools at 6 parallel calls on a 2-core machine.
_MAX_THREADS = 128
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="toolplan-tool")
    return _pool


async def run_in_thread(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``func`` in the shared pool, keeping the caller's context variables.

    A cancelled await stops waiting at once; the thread itself runs to completion (Python cannot
    interrupt a thread), so blocking tools should honour their own timeouts.
    """
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, func, *args, **kwargs)
    return await loop.run_in_executor(_get_pool(), call)
