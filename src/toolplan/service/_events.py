"""An execution's events as server-sent events: stored ones after a number, then the live tail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from .._json import dumps
from ._core import Service
from ._runner import FINISHED

__all__ = ("event_stream",)


async def event_stream(svc: Service, run_id: str, after: int) -> AsyncIterator[dict[str, Any]]:
    """Events numbered above ``after``; ends after the plan's end (``plan_finished``).

    The stream reads the store, so it shows the execution wherever it runs (this process or
    another). It ends early when the execution has finished and has no later events.
    """
    interval = min(0.2, svc.config.poll_interval)
    while True:
        events = await svc.store.events(run_id, after=after, limit=500)
        for e in events:
            after = e.seq
            data = {"seq": e.seq, "type": e.type, "step_id": e.step_id, "payload": e.payload, "at": e.at}
            yield {"id": str(e.seq), "event": e.type, "data": dumps(data)}
            if e.type == "plan_finished":
                return
        if not events:
            finished = await svc.data.status_of(run_id) in FINISHED
            if finished and not await svc.store.events(run_id, after=after, limit=1):
                return
            await asyncio.sleep(interval)
