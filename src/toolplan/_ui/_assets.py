"""The live page's files, shipped in the package (no CDN: many machines that run plans are offline)."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ("ASSETS", "PAGE_HEADERS", "asset", "home_page", "page")

# The files under static/ the servers hand out, by the name in /ui/static/{name}, with their type.
ASSETS = {
    "live.js": "text/javascript; charset=utf-8",
    "live.css": "text/css; charset=utf-8",
    "home.js": "text/javascript; charset=utf-8",
    "key.js": "text/javascript; charset=utf-8",
    "dagre.min.js": "text/javascript; charset=utf-8",
    "dagre.LICENSE": "text/plain; charset=utf-8",
}
_PATHS = {"dagre.min.js": "vendor/dagre.min.js", "dagre.LICENSE": "vendor/dagre.LICENSE"}

# Sent with the page and its files: they load only themselves, and talk only to the server that sent them.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def _read(path: str) -> bytes:
    return resources.files("toolplan._ui").joinpath("static", *path.split("/")).read_bytes()


def page() -> bytes:
    """The page (HTML): the same for every execution; its script reads the id from the address."""
    return _read("index.html")


def home_page() -> bytes:
    """The planner service's home page (HTML): its recent executions, linked to their live pages."""
    return _read("home.html")


def asset(name: str) -> tuple[bytes, str] | None:
    """A static file's bytes and content type, or None when ``name`` is not one of `ASSETS`."""
    kind = ASSETS.get(name)
    if kind is None:
        return None
    return _read(_PATHS.get(name, name)), kind
