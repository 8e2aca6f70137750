"""`serve`: run a planner service under uvicorn until stopped (what ``toolplan serve`` runs)."""

from __future__ import annotations

import uvicorn

from ..models import Model
from ..store import Store
from ..tools import ToolsLike
from ._app import create_app
from ._config import ServiceConfig
from ._core import Service

__all__ = ("serve",)


async def serve(
    store: Store,
    tools: ToolsLike,
    *,
    model: Model | str | None = None,
    api_keys: tuple[str, ...] = (),
    config: ServiceConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
) -> None:
    """Serve until SIGINT/SIGTERM.

    On start, executions left running by a dead process are taken up (once their lease has ended;
    at once for a dead process on this machine); on stop, the ones still running here are queued
    again for the next process.
    """
    service = Service(store, tools, model=model, config=config, api_keys=api_keys)
    # A stop waits at most this long for open requests (an SSE stream a browser keeps open) to end.
    web = uvicorn.Config(
        create_app(service), host=host, port=port, log_level=log_level, lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(web)
    await server.serve()
