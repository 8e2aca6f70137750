"""``toolplan run --ui``: the live page of the run, served on 127.0.0.1 while it runs and a while after."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from rich.console import Console

from .._ui import LiveFeed, LiveServer
from ..execute import EventHandler, PlanEvent
from ..plan import CompiledPlan
from ._loader import CliInputError
from ._render import say

__all__ = ("LivePage", "both", "live_page", "new_local_run_id")


class LivePage:
    """The served page of one run: pass `feed` as ``on_event``; `linger` once the run has ended."""

    def __init__(self, server: LiveServer, console: Console) -> None:
        self.server = server
        self.feed = server.feed
        self.console = console

    def linger(self, seconds: float) -> None:
        """Keep serving for ``seconds`` (the page shows the finished run); Ctrl-C raises `KeyboardInterrupt`."""
        if seconds <= 0:
            return
        shown = f"{seconds:g} s" if seconds < 120 else f"{seconds / 60:g} minutes"
        say(
            self.console,
            f"The run has ended; its live view stays at {self.server.url} for {shown} (--ui-keep). "
            "Press Ctrl-C to stop it now.",
            "dim",
        )
        threading.Event().wait(seconds)


@contextlib.contextmanager
def live_page(compiled: CompiledPlan, run_id: str, *, port: int, console: Console) -> Iterator[LivePage]:
    """Serve the run's page on 127.0.0.1:``port`` (0: a free port) and print its address."""
    if not 0 <= port <= 65535:
        raise CliInputError(f"--ui-port must be a port number from 0 to 65535 (0: any free port), got {port}.")
    try:
        server = LiveServer(LiveFeed(run_id, compiled), port=port)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliInputError(
            f"Cannot serve the live view on 127.0.0.1:{port} ({reason}): pick another --ui-port, or 0 for any free one."
        ) from None
    with server:
        say(console, f"Live view of run {run_id}: {server.url}", "bold")
        yield LivePage(server, console)


def new_local_run_id() -> str:
    """An id for a run without a store, as the engine makes one (the page's address needs it first)."""
    return os.urandom(8).hex()


def both(first: EventHandler, second: EventHandler) -> EventHandler:
    """One ``on_event`` that calls two handlers in turn."""

    def handler(event: PlanEvent) -> None:
        first(event)
        second(event)

    return handler
