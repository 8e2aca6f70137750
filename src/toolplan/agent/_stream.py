"""`AgentStream`: the events of a running agent, as they happen (``agent.run_stream``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Generic, Self, cast

from typing_extensions import TypeVar

from .._tasks import task_group
from ._events import AgentEvent, RunFinished
from ._result import AgentResult, OutputT

__all__ = ("AgentStream",)

#: The type of the run's ``deps`` (as `Agent`'s).
DepsT = TypeVar("DepsT", default=None)


class AgentStream(Generic[DepsT, OutputT]):
    """The events of a running agent; ``result`` is set when the run ends. Use with ``async with``."""

    def __init__(self, run: Callable[[Callable[[AgentEvent], None]], Coroutine[Any, Any, AgentResult[Any]]]) -> None:
        self._run = run  # starts the run, given the handler of its events
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self.result: AgentResult[OutputT] | None = None
        self._cm: Any = None

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Self]:
        def emit(event: AgentEvent) -> None:
            if isinstance(event, RunFinished):
                self.result = cast("AgentResult[OutputT]", event.result)
            self._queue.put_nowait(event)

        async with task_group() as tg:
            task = tg.create_task(self._run(emit))
            task.add_done_callback(lambda _t: self._queue.put_nowait(None))
            try:
                yield self
            finally:
                if not task.done():
                    task.cancel()

    async def __aenter__(self) -> Self:
        self._cm = self._session()
        return await self._cm.__aenter__()  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._cm.__aexit__(*exc)  # type: ignore[no-any-return]

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[AgentEvent]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event
