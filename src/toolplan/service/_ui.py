"""The live page of an execution at ``/ui/executions/{id}`` (no key: the page asks for one) and its files.

The page is the one ``toolplan run --ui`` serves (`toolplan._ui`); it reads
``GET /v1/executions/{id}/graph``, ``GET /v1/executions/{id}`` and the event stream with the key
it is given in the address's fragment (``#key=...``, never sent to a server) or asks for.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from .._ui import PAGE_HEADERS, asset, page
from ._errors import ApiError

__all__ = ("ui_router",)

ui_router = APIRouter(prefix="/ui", include_in_schema=False)


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
