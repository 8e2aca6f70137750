"""`Runner`: runs the service's executions in tasks the service owns, never a request's.

One loop claims work from the store (an execution posted here, one queued by another process, one
whose process died: the store's leases decide), up to ``slots`` at a time, and passes on cancels asked
of this process. An execution it stops, for a client's cancel or because the service stops, is handed
back (`Store.hand_back`): in the transaction that ends its run here it is stored ``cancelled`` if a
cancel is still asked then, else ``queued`` for any process to take up (a resume withdrew the cancel).
A claim it stops before the run began is let go the same way (`ServiceStore.let_go`), never left
``running`` with nothing running until its lease ends. docs/service.md draws the states.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ..execute import WindowCharge
from ..store import Store, StoreWindow, resume
from ..tools import ToolRegistry
from ._approvals import expire_due, rule_and_answers
from ._cache import cache_of, key_of
from ._config import ServiceConfig
from ._store import ServiceStore

__all__ = ("Runner",)

log = logging.getLogger("toolplan.service")

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
#: Where a client waiting for an execution stops waiting: it finished, or it waits for a person's answer.
SETTLED = FINISHED | {"pending_approval"}
_EXPIRY_CHECK = 1.0  # seconds between looks for waiting executions past their deadline


class Runner:
    """Claims and runs executions; see the module docstring."""

    def __init__(self, store: Store, tools: ToolRegistry, config: ServiceConfig) -> None:
        self.store = store
        self.data = ServiceStore(store)
        self.tools = tools
        self.config = config
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()  # stopped here before their run began (`_execute` lets go)
        self._started: set[str] = set()  # whose task has begun
        self._ended: dict[str, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._next_local_check = 0.0
        self._next_cancel_check = 0.0  # (loop time) when turns woken for work queued here look for cancels again
        self._next_expiry_check = 0.0  # (time.time) when to look for approvals past their deadline
        self._next_deadline: float | None = None  # the earliest deadline seen ahead
        self._full = False  # the last look for work stopped at the slots' limit: an ending run frees one
        self._queued = 0  # executions queued here since the last turn (`wake(queued=True)`)
        self._look = True  # the next turn looks for every run that needs a process, not only those queued here
        # Each key's calls charged to its budget window (in the store: shared by every worker).
        self.window = StoreWindow(store, config.key_budget) if config.key_budget is not None else None

    def wake(self, *, queued: bool = False) -> None:
        """Look for work now; ``queued``: an execution was queued here (and that is all there is to claim).

        A turn woken only for executions queued here claims as many runs as were queued, without a
        last look that would find none; runs queued elsewhere are found at the next poll.
        """
        if queued:
            self._queued += 1
        else:
            self._look = True
        self._wake.set()

    async def run(self) -> None:
        """Claim and run executions until cancelled; then hand back what is still running."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                try:
                    while True:
                        self._wake.clear()
                        wait = self.config.poll_interval
                        look, queued = self._look, self._queued
                        self._look, self._queued = False, 0
                        try:
                            wait = min(wait, await self._expire())
                            await self._fill(group, None if look else queued)
                            await self._pass_cancels(look)
                        except Exception:  # the store failed: log it and try again on the next turn
                            self._look = True
                            log.exception("toolplan service: looking for work failed")
                        try:
                            async with asyncio.timeout(wait):
                                await self._wake.wait()
                        except TimeoutError:
                            self._look = True  # the poll: look for work from anywhere
                except asyncio.CancelledError:
                    # The service stops (the group cancels the executions next): each is queued again
                    # for the next process as it stops, not stored cancelled (a client's cancel stays one).
                    for run_id in self.tasks:
                        self.store.hand_back(run_id)
                    raise
        finally:
            self._group = None
            # Claims whose task never began (cancelled before its first step): let go of them here.
            for run_id in [r for r in self.tasks if r not in self._started]:
                self.tasks.pop(run_id, None)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.data.let_go(run_id, self.store.owner))

    async def _expire(self) -> float:
        """Queue again the executions whose approval has passed its deadline; seconds to the next one.

        The store is looked at once a second at most (waiting executions may be many), and when the
        next deadline seen comes.
        """
        now = time.time()
        if now < self._next_expiry_check and (self._next_deadline is None or now < self._next_deadline):
            return float("inf") if self._next_deadline is None else max(self._next_deadline - now, 0.01)
        self._next_expiry_check = now + _EXPIRY_CHECK
        self._next_deadline = await expire_due(self.store)
        return float("inf") if self._next_deadline is None else max(self._next_deadline - time.time(), 0.01)

    async def _fill(self, group: asyncio.TaskGroup, queued: int | None = None) -> None:
        """Claim runs up to the slots' limit, until none is left; or up to ``queued`` (queued here) of them."""
        loop = asyncio.get_running_loop()
        # Now and then (and on start), also take over runs of dead processes of this machine at once.
        dead_local = loop.time() >= self._next_local_check
        if dead_local:
            self._next_local_check = loop.time() + self.store.lease / 3
            queued = None
        while len(self.tasks) < self.config.slots:
            if queued is not None:
                if queued <= 0:
                    return  # as many claimed as were queued here: no look for more (the poll looks)
                queued -= 1
            run_id = await self.store.claim_next(skip=list(self.tasks), dead_local=dead_local)
            if run_id is None:
                self._full = False
                return
            self.tasks[run_id] = group.create_task(self._execute(run_id), name=f"toolplan:{run_id}")
        self._full = True

    async def _pass_cancels(self, look: bool) -> None:
        """Stop the runs here whose cancel was asked of another process: at a look, else once a poll interval.

        (A cancel asked of this process stops its run at once: `cancel`.) A turn woken only for an
        execution queued here does not look again sooner.
        """
        now = asyncio.get_running_loop().time()
        if not (look or now >= self._next_cancel_check):
            return
        self._next_cancel_check = now + self.config.poll_interval
        for run_id in await self.data.cancels_for(self.store.owner, list(self.tasks)):
            self.cancel(run_id)

    def cancel(self, run_id: str) -> bool:
        """Cancel an execution this process runs; False if it runs none by that id."""
        task = self.tasks.get(run_id)
        if task is None:
            return False
        if run_id not in self._started:  # cancelled before its first step, the task would never let go
            self._cancelled.add(run_id)
            return True
        self.store.hand_back(run_id)  # stored cancelled as it stops, unless a resume withdrew the cancel
        task.cancel()
        return True

    async def _execute(self, run_id: str) -> None:
        self._started.add(run_id)
        closed = False  # the run's journal let go of it (resume returned)
        try:
            if run_id in self._cancelled:
                return  # `finally` lets go of the claim
            readers = self.data.readers  # the app's read pool on PostgreSQL (one round trip a read)
            key, key_ttl = await key_of(self.store, run_id, readers)  # one read: the budget's key and its cache setting
            window = None if self.window is None else WindowCharge(self.window, key or "(no key)")
            rule, answers = await rule_and_answers(self.store, run_id, readers)
            cache = cache_of(self.store, key_ttl, self.config.cache_ttl)
            await resume(
                run_id,
                self.tools,
                store=self.store,
                backend=self.config.backend,
                window=window,
                approval=rule,
                approvals=answers or None,
                cache=cache,
            )
            closed = True
        except Exception:
            log.exception("toolplan service: execution %s stopped with an error", run_id)
        finally:
            try:
                if not closed:  # held still if the run never began, or was stopped while it claimed
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self.data.let_go(run_id, self.store.owner))
            finally:
                self.store.keep(run_id)
                self.tasks.pop(run_id, None)
                self._started.discard(run_id)
                self._cancelled.discard(run_id)
                ended = self._ended.pop(run_id, None)
                if ended is not None:
                    ended.set()
                # Look for work again if a run may wait for the slot this one frees, or this one stopped
                # unfinished (queued again: a resume withdrew its cancel); else the next wake or poll will.
                if self._full or not closed:
                    self.wake()

    async def wait(self, run_id: str, timeout: float) -> str:
        """Wait up to ``timeout`` seconds for the execution to finish; returns its status then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Registered before the execution is claimed (it may be claimed here just after): `_execute` sets it.
        ended = self._ended.setdefault(run_id, asyncio.Event())
        try:
            while True:
                status = await self.data.status_of(run_id)
                left = deadline - loop.time()
                if status in SETTLED or left <= 0:
                    return status
                if ended.is_set():  # it stopped here since that look (finished, or queued again): look again
                    ended = self._ended.setdefault(run_id, asyncio.Event())
                    continue
                with contextlib.suppress(TimeoutError):  # ended here, or a look at the store (run elsewhere)
                    async with asyncio.timeout(min(left, self.config.poll_interval)):
                        await ended.wait()
        finally:
            if run_id not in self.tasks and self._ended.get(run_id) is ended:
                del self._ended[run_id]  # not running here: nothing would set it
