"""``--openapi SPEC[=BASE_URL]``: the operations of OpenAPI documents as tools of ``run`` and ``mcp serve``."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from .._errors import ToolplanError
from ..tools import ToolRegistry
from ._common import fail

if TYPE_CHECKING:
    from ..builtin import OpenAPIToolset

__all__ = ("OpenAPIOpt", "add_openapi", "load_openapi", "split_openapi_spec")

OpenAPIOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--openapi",
        metavar="SPEC[=BASE_URL]",
        help="Also one tool per operation of this OpenAPI 3.0/3.1 document (a file, or an http(s) URL); "
        "=BASE_URL says where the API is (default: the document's first server). A bearer token for it: "
        "$TOOLPLAN_OPENAPI_TOKEN. Repeatable. See docs/openapi.md.",
    ),
]
_SPLIT = re.compile(r"^(.+?)=(https?://\S+)$")


def split_openapi_spec(text: str) -> tuple[str, str | None]:
    """``SPEC=BASE_URL`` into the document and the base URL (None when not given)."""
    match = _SPLIT.match(text)
    return (match.group(1), match.group(2)) if match else (text, None)


async def load_openapi(specs: Sequence[str]) -> list[OpenAPIToolset]:
    """A toolset per ``--openapi`` value; an unusable one is a one-line error (exit 2).

    A host typed on the command line (the document's URL, or BASE_URL) may be on this machine or
    your network: the model chooses arguments, never the host. A host the document names must be
    public. Calls go only to that one host.
    """
    from ..builtin import BearerAuth, OpenAPIToolset

    token = os.environ.get("TOOLPLAN_OPENAPI_TOKEN")
    auth = BearerAuth(token) if token else None
    out: list[OpenAPIToolset] = []
    for text in specs:
        spec, base_url = split_openapi_spec(text)
        try:
            if spec.startswith(("http://", "https://")):
                toolset = await OpenAPIToolset.from_url(spec, base_url=base_url, auth=auth, allow_private_networks=True)
            else:
                toolset = OpenAPIToolset(spec, base_url=base_url, auth=auth, allow_private_networks=True)
        except ToolplanError as exc:
            fail(f"--openapi {text!r}: {' '.join(exc.message.split())}")
        typed = {_host(u) for u in (spec, base_url) if u is not None and u.startswith(("http://", "https://"))}
        if _host(toolset.base_url) not in typed:  # the document chose the host: public addresses only
            toolset.policy = dataclasses.replace(toolset.policy, allow_private_networks=False)
        if not toolset.names:
            fail(f"--openapi {text!r}: the document has no usable operation ({len(toolset.skipped)} left out).")
        out.append(toolset)
    return out


def _host(url: str) -> str:
    import httpx  # there: OpenAPIToolset needed it

    try:
        return str(httpx.URL(url).host).lower()
    except Exception:  # not a URL: no host to trust
        return ""


def add_openapi(registry: ToolRegistry | None, specs: Sequence[str], loop: asyncio.Runner) -> ToolRegistry:
    """``registry`` plus the operations of ``--openapi`` documents (fetched in ``loop``)."""
    out = ToolRegistry()
    try:
        if registry is not None:
            out.add_all(registry)
        for toolset in loop.run(load_openapi(specs)):
            out.add(toolset)
    except ToolplanError as exc:
        fail(f"{exc.message} (OpenAPI operations collide with other tools; rename one side)")
    return out
