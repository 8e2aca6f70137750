"""Run blocking callables off the event loop, on one shared, lazily grown pool of daemon threads.

Python cannot stop a thread. When the await of a sync tool is abandoned (its timeout passed, or the
run was cancelled) the function goes on in its thread. Two rules follow:

- The call's owner is told (``CallContext.on_linger``) so the tool's concurrency slots stay taken
  until the thread really ends: a ``concurrency=1`` tool never runs twice at once, and a retry does
  not overlap the attempt it replaces.
- The threads are daemon threads, so a process (the CLI, a script) exits when its work is done
  instead of waiting for abandoned functions; their results were already discarded.
- The function is told, cooperatively: ``current_call().cancelled`` turns true, so a tool that
  checks it between units of work can stop early.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ParamSpec, TypeVar

from ._context import _CURRENT, abandon, linger_hook

__all__ = ("run_in_thread",)

P = ParamSpec("P")
R = TypeVar("R")

# Sized for I/O-bound tools: plans run up to 20 steps at once by default and several plans may
# share a process. The default asyncio executor (min(32, cpus + 4) threads) would silently cap a
# plan of sync tools at 6 parallel calls on a 2-core machine.
_MAX_THREADS = 128


class _DaemonPool:
    """A minimal pool of daemon threads.

    `concurrent.futures.ThreadPoolExecutor` joins its non-daemon threads at interpreter exit, which
    would keep a process alive for abandoned calls.
    """

    def __init__(self, max_threads: int) -> None:
        self._max = max_threads
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        # Idle workers minus queued calls: below 0 only when every one of the _max threads is busy.
        self._idle = 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            start = self._idle == 0 and self._threads < self._max
            if start:
                self._threads += 1
            else:
                self._idle -= 1
        self._work.put((future, fn))
        if start:
            threading.Thread(target=self._worker, name=f"toolplan-tool-{self._threads}", daemon=True).start()
        return future

    def _worker(self) -> None:
        while True:
            future, fn = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:  # handed to the awaiting task (SystemExit included)
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                del future, fn
            with self._lock:
                self._idle += 1


_pool: _DaemonPool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _DaemonPool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _DaemonPool(_MAX_THREADS)
    return _pool


async def run_in_thread(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``func`` in the shared pool, keeping the caller's context variables.

    A cancelled await stops waiting at once; the thread itself runs to completion (Python cannot
    interrupt a thread). When that happens during a tool call, the call's owner is told, so the
    call keeps counting against its limits until the thread ends.
    """
    ctx = contextvars.copy_context()
    future = _get_pool().submit(functools.partial(ctx.run, func, *args, **kwargs))
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if not future.done():  # already running: cancel() could not stop it
            raw = _CURRENT.get()
            if raw is not None:
                abandon(raw, future)  # the function sees current_call().cancelled and may stop early
                hook = linger_hook(raw)
                if hook is not None:
                    hook(raw, future)
        raise
