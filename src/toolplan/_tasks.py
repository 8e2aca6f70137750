"""`task_group`: an asyncio TaskGroup that re-raises a lone error as itself.

On Python 3.11 an exception raised in a TaskGroup's body (a model's HTTP error in the agent loop,
a user's error inside ``async with stream_plan(...)``) comes out wrapped in an ExceptionGroup,
as does the failure of a single child task. Callers expect the error itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ("task_group",)


@asynccontextmanager
async def task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """Like ``asyncio.TaskGroup()``; a group holding exactly one error raises that error."""
    try:
        async with asyncio.TaskGroup() as tg:
            yield tg
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        error = group.exceptions[0]
        raise error.with_traceback(error.__traceback__) from error.__cause__
