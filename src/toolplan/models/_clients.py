"""One SDK client per event loop, shared by the provider adapters."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ("LoopClients",)


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class LoopClients(Generic[C]):
    """The client for the running event loop, made on first use (or the one the user gave).

    An HTTP connection pool cannot outlive the loop it was made on, and ``run_sync()`` and test
    frameworks create a loop per call, so each loop gets its own client.
    """

    def __init__(self, given: C | None, make: Callable[[], C]) -> None:
        self._given = given
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = weakref.WeakKeyDictionary()

    def get(self) -> C:
        """The running loop's client."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (a given client is left open)."""
        with contextlib.suppress(RuntimeError):
            client = self._clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                await client.close()
