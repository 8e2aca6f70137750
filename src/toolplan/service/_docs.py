"""``/docs``: Swagger UI over ``/openapi.json``, with its files served from here (no CDN: offline works).

The files are those of the ``swagger-ui-bundle`` package (Apache-2.0), part of the ``[service]``
extra. Without it, ``/docs`` says how to get it.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import Response

from ._errors import ApiError

__all__ = ("docs_router",)

docs_router = APIRouter(include_in_schema=False)

_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def _folder() -> Path | None:
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    return Path(swagger_ui_bundle.swagger_ui_path)


@docs_router.get("/docs")
async def docs() -> Response:
    """Swagger UI (its files from ``/docs/static/``)."""
    if _folder() is None:
        raise ApiError(
            503,
            "missing_dependency",
            "This server has no Swagger UI files: pip install 'toolplan[service]' (swagger-ui-bundle). "
            "The API's description is at /openapi.json.",
        )
    return get_swagger_ui_html(
        openapi_url="/docs/openapi.json",
        title="toolplan planner service",
        swagger_js_url="/docs/static/swagger-ui-bundle.js",
        swagger_css_url="/docs/static/swagger-ui.css",
        swagger_favicon_url="/docs/static/favicon-32x32.png",
    )


@docs_router.get("/docs/openapi.json")
async def docs_openapi(request: Request) -> dict[str, Any]:
    """``/openapi.json`` as the bundled Swagger UI (4.x) reads it: it renders no 3.1 document.

    Only the version string differs; ``/openapi.json`` itself stays OpenAPI 3.1 for client generators.
    """
    return {**request.app.openapi(), "openapi": "3.0.3"}


@docs_router.get("/docs/static/{name}")
async def docs_file(name: str) -> Response:
    """One of Swagger UI's files."""
    folder = _folder()
    if folder is None or name not in _FILES:
        raise ApiError(404, "not_found", f"No file {name!r} here.")
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return Response((folder / name).read_bytes(), media_type=kind, headers={"Cache-Control": "max-age=3600"})
