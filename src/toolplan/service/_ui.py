"""The service's pages: the home page ``/``, the live page ``/ui/executions/{id}``, and their files.

The home page lists the recent executions, each linked to its live page. No key for the pages: each
asks for one and sends it with its API calls.

The page is the one ``toolplan run --ui`` serves (`toolplan._ui`); it reads
``GET /v1/executions/{id}/graph``, ``GET /v1/executions/{id}`` and the event stream with the key
it is given in the address's fragment (``#key=...``, never sent to a server) or asks for.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from .._ui import PAGE_HEADERS, asset, home_page, page
from ._errors import ApiError

__all__ = ("home_router", "ui_router")

ui_router = APIRouter(prefix="/ui", include_in_schema=False)
home_router = APIRouter(include_in_schema=False)


@home_router.get("/")
async def home() -> Response:
    """The home page: the recent executions (read with the key the page asks for), linked to their live pages."""
    return Response(home_page(), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


@ui_router.get("/")
async def ui_home() -> Response:
    """``/ui/`` is the home page."""
    return RedirectResponse("/", status_code=307)


@ui_router.get("/executions/{execution_id}")
async def execution_page(execution_id: str) -> Response:
    """The live page of an execution (the same for every id: its script reads the id from the address)."""
    return Response(page(), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


@ui_router.get("/static/{name}")
async def static_file(name: str) -> Response:
    """One of the page's files."""
    found = asset(name)
    if found is None:
        raise ApiError(404, "not_found", f"No file {name!r} here: the page's files are under /ui/static/.")
    body, kind = found
    return Response(body, media_type=kind, headers=PAGE_HEADERS)
