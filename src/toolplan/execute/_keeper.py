"""`SlotKeeper`: a timed-out sync tool's thread runs on, and keeps its tool's slots until it ends.

While any such thread holds slots, a keeper task in the run's task group keeps the run open, so the
steps waiting for those slots still start when they are freed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ._invoke import when_done
from ._scheduler import Scheduler

__all__ = ("SlotKeeper",)


class SlotKeeper:
    """The slots that abandoned threads of one run hold, and the future that keeps the run open."""

    __slots__ = ("holds", "unheld")

    def __init__(self) -> None:
        self.holds = 0  # abandoned threads holding slots
        self.unheld: asyncio.Future[None] | None = None  # done when no thread holds a slot any more

    def hold(
        self,
        sched: Scheduler,
        tool: str,
        thread: Future[Any],
        tg: asyncio.TaskGroup | None,
        relaunch: Callable[[], None],
    ) -> None:
        """``thread`` (of a call to ``tool``) holds one slot until it ends; then ``relaunch`` starts what waits."""
        sched.hold(tool, 1)
        self.holds += 1
        if self.unheld is None and tg is not None:
            unheld = self.unheld = asyncio.get_running_loop().create_future()
            tg.create_task(_wait_for(unheld))

        def ended() -> None:
            sched.hold(tool, -1)
            self.holds -= 1
            relaunch()
            if self.holds == 0:
                self.release()

        when_done(thread, ended)

    def release(self) -> None:
        """Let the run end: no abandoned thread holds a slot, or no step is left to wait for one."""
        unheld = self.unheld
        if unheld is not None:
            self.unheld = None
            if not unheld.done():
                unheld.set_result(None)


async def _wait_for(future: asyncio.Future[None]) -> None:
    await future
