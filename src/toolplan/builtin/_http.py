"""`HttpTools`: GET and POST to allow-listed hosts, within time and size limits."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._fetch import HttpPolicy, HttpResponse
from ._names import ToolNames, check_names

__all__ = ("HttpTools",)

_MiB = 1024 * 1024


class HttpTools(Toolset):
    """HTTP requests from a plan: ``http_get`` (read-only, idempotent) and ``http_post`` (destructive).

    Nothing is allowed by default: every host must be listed in ``allow_hosts``. Addresses that are
    loopback, private, link-local or otherwise not public are refused even for listed hosts unless
    ``allow_private_networks=True``; redirects are followed one by one and each target is checked
    again; bodies are read as a stream and cut at ``max_response_bytes``; one deadline covers a whole
    call. See `HttpPolicy` for the exact rules. Needs ``pip install "toolplan[builtin]"`` (httpx).

    A 4xx answer is a business error (the model can fix the request); a 5xx or 429 answer, a
    connection failure and a timeout are infrastructure errors, which toolplan retries for
    ``http_get`` (idempotent) and not for ``http_post``. ``check_status=false`` returns any answer.

    Args:
        allow_hosts: Hosts requests may go to: ``"api.example.com"``, ``"api.example.com:8443"``,
            ``"*.example.com"`` (subdomains), ``"203.0.113.7"``, or ``"*"`` for any public host.
        allow_private_networks: Let listed hosts be on loopback or private networks.
        headers: Headers sent with every request (an API key, say). On a redirect to another origin
            these and the call's own headers are dropped, except those named in ``forward_headers``.
        forward_headers: Header names safe to send on to another origin after a redirect.
        timeout: Seconds for a whole call, redirects included.
        max_response_bytes: Largest response body kept (a longer one is cut, ``truncated`` set).
        max_request_bytes: Largest request body ``http_post`` sends.
        max_redirects: Redirects followed per call.
        verify: TLS verification: True (the system's CAs), False, or an ``ssl.SSLContext``.
        read_only: Offer only ``http_get``.
        names: ``"toolplan"`` (``http_get``, ``http_post``) or ``"oasis"``: ``http_fetch`` (the same
            GET, read-only and idempotent) and ``http_post``.
        prefix: Put in front of every function name (see `Toolset`).
    """

    def __init__(
        self,
        *,
        allow_hosts: Iterable[str] = (),
        allow_private_networks: bool = False,
        headers: Mapping[str, str] | None = None,
        forward_headers: Iterable[str] = (),
        timeout: float = 30.0,
        max_response_bytes: int = _MiB,
        max_request_bytes: int = _MiB,
        max_redirects: int = 5,
        verify: ssl.SSLContext | bool = True,
        read_only: bool = False,
        names: ToolNames = "toolplan",
        prefix: str = "",
    ) -> None:
        check_names("HttpTools", names)
        self.policy = HttpPolicy(
            allow_hosts=tuple(allow_hosts) if not isinstance(allow_hosts, str) else (allow_hosts,),
            allow_private_networks=allow_private_networks,
            headers=dict(headers or {}),
            forward_headers=(forward_headers,) if isinstance(forward_headers, str) else tuple(forward_headers),
            timeout=timeout,
            max_response_bytes=max_response_bytes,
            max_request_bytes=max_request_bytes,
            max_redirects=max_redirects,
            verify=verify,
            tool=f"{prefix}http",
        )
        # A call's own deadline is `timeout`; the tool's timeout is a backstop a little later.
        read = ToolAnnotations(read_only=True, idempotent=True, timeout=timeout + 5)
        write = ToolAnnotations(destructive=True, timeout=timeout + 5)
        get = "http_fetch" if names == "oasis" else "http_get"
        functions: list[FunctionTool[Any]] = [FunctionTool(self.http_get, name=get, annotations=read)]
        if not read_only:
            functions.append(FunctionTool(self.http_post, annotations=write))
        super().__init__(functions, prefix=prefix)

    async def http_get(
        self,
        url: str,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        check_status: bool = True,
    ) -> HttpResponse:
        """Fetch a URL with GET. JSON responses come back parsed in 'json', text in 'text'.

        Args:
            url: The http(s) URL; its host must be one the developer allowed.
            params: Query parameters added to the URL.
            headers: Extra request headers.
            check_status: Fail on a 4xx or 5xx answer; false returns it like any other.
        """
        return await self.policy.fetch("GET", url, params=params, headers=headers, check_status=check_status)

    async def http_post(
        self,
        url: str,
        body: Any = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        check_status: bool = True,
    ) -> HttpResponse:
        """Send a POST request. A JSON body is sent as application/json; a string body as it is.

        Args:
            url: The http(s) URL; its host must be one the developer allowed.
            body: The body: JSON data (object, list, number...) or a string.
            content_type: The body's content type (default: application/json for JSON data,
                text/plain for a string).
            headers: Extra request headers.
            check_status: Fail on a 4xx or 5xx answer; false returns it like any other.
        """
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, str):
            data = body.encode("utf-8", "replace")
            content_type = content_type or "text/plain; charset=utf-8"
        else:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
            content_type = content_type or "application/json"
        return await self.policy.fetch(
            "POST", url, headers=headers, body=data, content_type=content_type, check_status=check_status
        )
