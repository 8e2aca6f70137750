"""`create_app`: the FastAPI app of a `Service` (REST under /v1, GraphQL at /graphql, OpenAPI at /docs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from .._version import __version__
from ._core import Service
from ._docs import docs_router
from ._errors import install_error_handlers
from ._graphql import graphql_router
from ._limits import BodyLimit
from ._read import Readers
from ._rest import router
from ._ui import home_router, ui_router

__all__ = ("create_app",)


def create_app(service: Service) -> FastAPI:
    """The ASGI app of ``service``. Its lifespan runs the service's executions (see `Runner`).

    Every route under ``/v1`` and ``/graphql`` needs an API key (``X-API-Key``); ``/docs``,
    ``/openapi.json``, ``/healthz``, the home page ``/`` and the live page's files (``/ui/...``) do
    not (the pages ask for a key and send it with their API calls). ``/docs`` loads Swagger UI's
    files from this server (the ``swagger-ui-bundle`` package), never from a CDN.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        db = service.store.db
        readers = Readers(db.engine) if db.engine.dialect.name != "sqlite" else None
        service.data.readers = service.runner.data.readers = readers  # the runner's reads too
        try:
            async with asyncio.TaskGroup() as group:
                runner = group.create_task(service.runner.run(), name="toolplan:runner")
                try:
                    yield
                finally:
                    runner.cancel()  # executions still running are queued again for the next process
        finally:
            service.data.readers = service.runner.data.readers = None
            if readers is not None:
                readers.close()

    app = FastAPI(
        title="toolplan planner service",
        version=__version__,
        description="Natural language to a validated plan, stored and run by id. Send X-API-Key on every call.",
        lifespan=lifespan,
        docs_url=None,  # served below, with files from this server
        redoc_url=None,  # ReDoc would load from a CDN
    )
    app.state.service = service
    install_error_handlers(app)
    guard = [Depends(service.keys)]
    app.include_router(router, dependencies=guard)
    app.include_router(graphql_router(service), prefix="/graphql", dependencies=guard)
    app.include_router(ui_router)  # the live page asks for a key and sends it with each API call
    app.include_router(home_router)
    app.include_router(docs_router)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (no key needed)."""
        return {"status": "ok"}

    app.add_middleware(BodyLimit, limit=service.config.max_body_bytes)
    return app
