"""Guarded HTTP: an allow-list of hosts, pinned addresses, manual redirects, bounded time and size.

`HttpPolicy.fetch` is the one way the built-in tools reach the web (`HttpTools` here; search and
other providers later). For every hop of a request it:

1. checks the scheme (http, https) and the host against the allow-list;
2. resolves the host and checks every address: loopback, private, link-local, multicast and other
   non-global addresses are refused unless ``allow_private_networks`` (an allow-listed name that
   resolves to 127.0.0.1 is refused like 127.0.0.1 itself; an IPv6 address carrying an IPv4 one,
   such as NAT64 ``64:ff9b::10.0.0.1`` or 6to4 ``2002:0a00:0001::``, is judged by both);
3. connects to the address it checked (the URL's host is replaced by it; ``Host`` and TLS SNI keep
   the name, so certificates are verified against the name), so a second DNS answer cannot move
   the request elsewhere (DNS rebinding);
4. reads the body as a stream and stops at ``max_response_bytes`` (decompressing gzip and deflate
   itself, bounded, so a compression bomb is cut like any other large body);
5. follows a redirect only after checking its target again from step 1; when a redirect leaves the
   origin (scheme, host, port), every header the policy or the call set is dropped, except those
   listed in ``forward_headers``.

The whole call, redirects included, has one deadline (``timeout``).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import re
import socket
import ssl
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired

from typing_extensions import TypedDict

from .._errors import ToolError, UserError
from .._json import JSONTextError, loads
from .._optional import import_optional

if TYPE_CHECKING:
    import httpx

__all__ = ("HttpPolicy", "HttpResponse", "import_httpx")

_MiB = 1024 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive",
     "proxy-authorization", "proxy-connection", "accept-encoding"}
)  # fmt: skip
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
_TEXT_TYPES = re.compile(r"^(text/|application/([\w.+-]*\+)?(json|xml|javascript|ecmascript|x-www-form-urlencoded))")
_MAX_HEADERS_SHOWN = 100
_HOST = re.compile(r"[a-z0-9_.-]{1,253}|[0-9a-f:.]{2,45}")  # a DNS name (IDNA), or an IPv4/IPv6 address


def import_httpx(feature: str = "HttpTools", extra: str = "builtin") -> Any:
    """The ``httpx`` module, or an error naming the extra to install."""
    return import_optional("httpx", feature, extra, package="httpx")


class HttpResponse(TypedDict):
    """What a request returns to the model.

    ``json`` holds the parsed body when the response is JSON, ``text`` the body of other text
    responses, ``base64`` the body of binary ones. ``truncated`` is true when the body was longer than
    the limit (then only its first ``bytes`` are there, and ``json`` is not parsed).
    """

    status: int
    url: str
    headers: dict[str, str]
    content_type: str
    bytes: int
    truncated: bool
    redirects: list[str]
    text: NotRequired[str]
    json: NotRequired[Any]
    base64: NotRequired[str]


@dataclass(frozen=True, slots=True)
class _HostRule:
    host: str  # IDNA-encoded and lower case; "*.example.com" for subdomains; "*" for any host
    port: int | None

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def _rule(entry: str, httpx: Any) -> _HostRule:
    text = entry.strip().lower()
    if text in ("*", "*:*"):
        return _HostRule("*", None)
    wildcard = text.startswith("*.")
    try:
        url = httpx.URL(f"http://{text[2:] if wildcard else text}/")
        host = url.raw_host.decode("ascii")
    except Exception:
        raise UserError(
            f"allow_hosts entry {entry!r} is not a host name: use 'api.example.com', 'api.example.com:8443', "
            "'*.example.com' (its subdomains), '127.0.0.1' or '*' (any public host)."
        ) from None
    if not _HOST.fullmatch(host) or "/" in text or "@" in text:
        raise UserError(f"allow_hosts entry {entry!r} is not a host name (no scheme, path or user part).")
    return _HostRule(f"*.{host}" if wildcard else host, url.port)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 prefix: the IPv4 address is the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 prefixes (any embedding): refused whole
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT ::ffff:0:a.b.c.d


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, translated, NAT64, 6to4)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in (_NAT64, _IPV4_COMPATIBLE, _IPV4_TRANSLATED)):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _blocked(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A loopback, private, link-local, multicast, reserved or otherwise non-global address.

    An IPv6 address that carries an IPv4 address (``::ffff:10.0.0.1``, ``::10.0.0.1``,
    ``::ffff:0:10.0.0.1``, NAT64 ``64:ff9b::10.0.0.1``, 6to4 ``2002:0a00:0001::``) is judged by that
    IPv4 address too: a gateway on the way would deliver it there.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return True
        embedded = _embedded_ipv4(ip)
        if embedded is not None and _blocked(embedded):
            return True
    return not ip.is_global or ip.is_multicast


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpPolicy:
    """Where requests may go and how much they may take. `HttpTools` holds one; see the module doc.

    Other web tools reuse it: ``await HttpPolicy(allow_hosts=("api.example.com",)).fetch("GET", url)``.
    Raises `UserError` for an ``allow_hosts`` entry that is not a host, and `OptionalDependencyError`
    without httpx.

    Attributes:
        allow_hosts: Host names (``api.example.com``), with an optional port (``:8443``), wildcards
            for subdomains (``*.example.com``), IP addresses, or ``*`` for any host. Empty: nothing.
        allow_private_networks: Let allowed hosts resolve to loopback, private, link-local and other
            non-global addresses (a service on localhost or the LAN). Off by default.
        headers: Sent with every request (e.g. an API key); dropped when a redirect leaves the origin,
            like the headers of the call itself, unless listed in ``forward_headers``.
        forward_headers: Header names (any case) safe to send on after a redirect to another origin,
            e.g. ``("Accept", "User-Agent")``. Empty by default: nothing crosses origins.
        timeout: Seconds for a whole call, redirects included.
        max_response_bytes: Largest body read; a longer one is cut and marked ``truncated``.
        max_request_bytes: Largest request body sent.
        max_redirects: Redirects followed in one call.
        verify: TLS verification: True (system CAs), False (none), or an ``ssl.SSLContext``.
        tool: The name errors are reported for.
    """

    allow_hosts: tuple[str, ...] = ()
    allow_private_networks: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    forward_headers: tuple[str, ...] = ()
    timeout: float = 30.0
    max_response_bytes: int = _MiB
    max_request_bytes: int = _MiB
    max_redirects: int = 5
    verify: ssl.SSLContext | bool = True
    tool: str = "http"
    _rules: tuple[_HostRule, ...] = field(default=(), init=False, repr=False, compare=False)
    _forward: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        httpx = import_httpx()
        hosts: Any = self.allow_hosts  # a tuple by its type; a list or a single name from untyped callers
        hosts = (hosts,) if isinstance(hosts, str) else tuple(hosts)
        object.__setattr__(self, "allow_hosts", hosts)
        object.__setattr__(self, "_rules", tuple(_rule(h, httpx) for h in hosts))
        if self.timeout <= 0 or self.max_response_bytes < 1 or self.max_request_bytes < 0:
            raise UserError("HttpTools: timeout and max_response_bytes must be positive, max_request_bytes >= 0.")
        if self.max_redirects < 0:
            raise UserError("HttpTools: max_redirects must be >= 0.")
        _check_headers(self.headers, UserError)
        forward: Any = self.forward_headers  # a tuple by its type; a list or a single name from untyped callers
        forward = (forward,) if isinstance(forward, str) else tuple(forward)
        for name in forward:
            if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
                raise UserError(f"HttpTools: forward_headers entry {str(name)[:100]!r} is not a header name.")
        object.__setattr__(self, "forward_headers", forward)
        object.__setattr__(self, "_forward", frozenset(name.lower() for name in forward))

    def _error(self, message: str) -> ToolError:
        return ToolError(message, tool=self.tool)

    # -- checks --------------------------------------------------------------------------------------
    def check_url(self, url: httpx.URL, *, via: str = "") -> tuple[str, int]:
        """The (IDNA host, port) of ``url`` if the allow-list lets it through, else a `ToolError`."""
        if url.scheme not in ("http", "https"):
            raise self._error(f"{via}{str(url)[:200]!r} is not an http or https URL.")
        host = url.raw_host.decode("ascii").lower()
        if not host:
            raise self._error(f"{via}{str(url)[:200]!r} has no host.")
        port = url.port or (443 if url.scheme == "https" else 80)
        if any(rule.matches(host, port) for rule in self._rules):
            return host, port
        if not self._rules:
            raise self._error(
                f"{via}Requests to {host!r} are not allowed: no host is allowed at all. The developer allows "
                "hosts with HttpTools(allow_hosts=['api.example.com', ...]); until then this tool cannot be used."
            )
        allowed = ", ".join(str(r) for r in self._rules)
        raise self._error(
            f"{via}Requests to {host}:{port} are not allowed; allowed hosts: {allowed}. Use one of them (the "
            "developer adds hosts with HttpTools(allow_hosts=[...]))."
        )

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of ``host``, all of them checked; a `ToolError` if any is not allowed."""
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise self._error(f"The host {host!r} cannot be resolved ({exc.strerror}). Check the URL.") from None
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not self.allow_private_networks:
            for address in addresses:
                if _blocked(ipaddress.ip_address(address)):
                    raise self._error(
                        f"{host!r} resolves to {address}, a loopback, private or otherwise non-public address; "
                        "requests there are refused. (To reach a service on this machine or a private "
                        "network, the developer passes HttpTools(allow_private_networks=True).)"
                    )
        if not addresses:
            raise self._error(f"The host {host!r} has no address.")
        return addresses

    # -- the call ------------------------------------------------------------------------------------
    async def fetch(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        check_status: bool = True,
    ) -> HttpResponse:
        """Make one request (and its redirects) under this policy; see the module doc.

        Raises:
            ToolError: The request is not allowed, or the server answered 4xx (with ``check_status``).
            httpx.HTTPStatusError: The server answered 5xx or 429 (with ``check_status``): retryable.
            TimeoutError: No complete response within ``timeout`` seconds.
            ConnectionError: The server could not be reached.
        """
        httpx = import_httpx()
        try:
            target = httpx.URL(url, params=params) if params else httpx.URL(url)
        except Exception as exc:
            raise self._error(f"{url[:200]!r} is not a valid URL ({exc}).") from None
        sent = {**self.headers, **_check_headers(headers or {}, self._error)}
        if body is not None:
            if len(body) > self.max_request_bytes:
                raise self._error(f"The request body is {len(body)} bytes; the limit is {self.max_request_bytes}.")
            if content_type is not None:
                sent["content-type"] = content_type
        try:
            async with asyncio.timeout(self.timeout):
                return await self._follow(httpx, method.upper(), target, sent, body, check_status)
        except TimeoutError:
            raise TimeoutError(
                f"No complete response from {target.host!r} within {self.timeout:g} s (redirects included). "
                "Try again later, or ask for less data."
            ) from None

    async def _follow(
        self, httpx: Any, method: str, url: httpx.URL, headers: dict[str, str], body: bytes | None, check: bool
    ) -> HttpResponse:
        redirects: list[str] = []
        via = ""
        while True:
            host, port = self.check_url(url, via=via)
            addresses = await self.resolve(host, port)
            response, data, truncated = await self._send(httpx, method, url, host, addresses, headers, body)
            location = response.headers.get("location")
            if response.status_code in _REDIRECTS and location is not None:
                if len(redirects) >= self.max_redirects:
                    raise self._error(
                        f"{url.host!r} redirected more than {self.max_redirects} times; the last target was "
                        f"{location[:200]!r}. Request the final URL directly."
                    )
                try:
                    following = url.join(location)
                except Exception:
                    raise self._error(f"{url.host!r} redirected to an invalid URL {location[:200]!r}.") from None
                if (following.scheme, following.raw_host, following.port) != (url.scheme, url.raw_host, url.port):
                    # Another origin: only what the developer marked safe goes on (the body's type stays
                    # with the body, which a 307/308 carries on).
                    headers = {
                        k: v for k, v in headers.items() if k.lower() in self._forward or k.lower() == "content-type"
                    }
                if response.status_code == 303 or (response.status_code in (301, 302) and method == "POST"):
                    method, body = "GET", None
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
                redirects.append(str(following))
                via = f"A redirect from {str(url)[:200]!r}: "
                url = following
                continue
            result = _response(response, url, data, truncated, redirects)
            if check and response.status_code >= 400:
                self._raise_status(httpx, response, result)
            return result

    async def _send(
        self,
        httpx: Any,
        method: str,
        url: httpx.URL,
        host: str,
        addresses: list[str],
        headers: dict[str, str],
        body: bytes | None,
    ) -> tuple[httpx.Response, bytes, bool]:
        default_port = 443 if url.scheme == "https" else 80
        host_header = host if url.port in (None, default_port) else f"{host}:{url.port}"
        if ":" in host and url.port not in (None, default_port):
            host_header = f"[{host}]:{url.port}"
        sent = {**headers, "host": host_header, "accept-encoding": "gzip, deflate, identity"}
        extensions = {"sni_hostname": host} if url.scheme == "https" else {}
        last: Exception | None = None
        for address in addresses:
            pinned = url.copy_with(host=address)
            # A client per hop: a pooled connection is never reused for another host name (its TLS
            # session was verified for the first one).
            # httpx's own timeouts are a backstop: the call's deadline (asyncio.timeout) comes first.
            async with httpx.AsyncClient(
                follow_redirects=False, trust_env=False, verify=self.verify, timeout=self.timeout + 5
            ) as client:
                request = client.build_request(method, pinned, headers=sent, content=body, extensions=extensions)
                try:
                    response = await client.send(request, stream=True)
                except httpx.ConnectError as exc:
                    last = exc
                    continue
                except httpx.TransportError as exc:
                    raise ConnectionError(f"The request to {host!r} failed: {_one_line(exc)}") from None
                try:
                    data, truncated = await self._read(httpx, response, host)
                finally:
                    await response.aclose()
                return response, data, truncated
        raise ConnectionError(f"Could not connect to {host!r} on port {url.port or default_port}: {_one_line(last)}")

    async def _read(self, httpx: Any, response: httpx.Response, host: str) -> tuple[bytes, bool]:
        limit = self.max_response_bytes
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            decoder: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decoder = zlib.decompressobj()
        elif encoding in ("identity", ""):
            decoder = None
        else:
            raise self._error(f"{host!r} answered with content-encoding {encoding!r}, which this tool cannot read.")
        out = bytearray()
        raw_budget = 4 * limit + 65536  # compressed bytes read at most (a body that never inflates)
        try:
            async for chunk in response.aiter_raw():
                raw_budget -= len(chunk)
                if decoder is None:
                    out += chunk
                else:
                    pending = chunk
                    while pending and len(out) <= limit:
                        out += decoder.decompress(pending, limit + 1 - len(out))
                        pending = decoder.unconsumed_tail
                if len(out) > limit or raw_budget < 0:
                    return bytes(out[:limit]), True
        except zlib.error as exc:
            raise self._error(f"{host!r} sent a body that does not decompress ({exc}).") from None
        except httpx.TransportError as exc:
            raise ConnectionError(f"Reading the response from {host!r} failed: {_one_line(exc)}") from None
        return bytes(out), False

    def _raise_status(self, httpx: Any, response: httpx.Response, result: HttpResponse) -> None:
        status = response.status_code
        excerpt = (result.get("text") or json.dumps(result.get("json"), ensure_ascii=False) or "")[:300]
        message = (
            f"{result['url'][:200]} answered {status} {response.reason_phrase}"
            + (f": {excerpt}" if excerpt and excerpt != "null" else "")
            + "."
        )
        if status >= 500 or status == 429:
            raise httpx.HTTPStatusError(
                f"{message} The server failed or is busy; try again later.",
                request=response.request,
                response=response,
            )
        raise self._error(f"{message} Check the URL and the request (or pass check_status=false to get the response).")


def _check_headers(headers: Mapping[str, str], error: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise error(f"{str(name)[:100]!r} is not a valid header name.")
        if not isinstance(value, str) or any(c in value for c in "\r\n\x00") or len(value) > 8192:
            raise error(f"The value of header {name!r} is not a single line of text (at most 8192 characters).")
        if name.lower() in _FORBIDDEN_HEADERS:
            raise error(f"The header {name!r} is set by the tool itself; leave it out.")
        out[name] = value
    return out


def _response(
    response: httpx.Response, url: httpx.URL, data: bytes, truncated: bool, redirects: list[str]
) -> HttpResponse:
    content_type = response.headers.get("content-type", "")
    shown: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        if key in shown:
            shown[key] = f"{shown[key]}, {value}"
        elif len(shown) < _MAX_HEADERS_SHOWN:
            shown[key] = value
    result: HttpResponse = {
        "status": response.status_code,
        "url": str(url),
        "headers": shown,
        "content_type": content_type,
        "bytes": len(data),
        "truncated": truncated,
        "redirects": redirects,
    }
    mime = content_type.split(";")[0].strip().lower()
    if mime and not _TEXT_TYPES.match(mime):
        result["base64"] = base64.b64encode(data).decode("ascii")
        return result
    text = data.decode(_charset(content_type), "replace")
    if not truncated and (mime == "application/json" or mime.endswith("+json")):
        try:
            result["json"] = loads(text)
            return result
        except JSONTextError:
            pass  # not JSON after all (or beyond toolplan's bounds): the text is returned
    result["text"] = text
    return result


def _charset(content_type: str) -> str:
    match = re.search(r"charset=\"?([\w.:-]{1,40})", content_type, re.IGNORECASE)
    if match:
        try:
            import codecs

            return codecs.lookup(match.group(1)).name
        except LookupError:
            pass
    return "utf-8"


def _one_line(exc: BaseException | None) -> str:
    text = " ".join(str(exc).split()) if exc is not None else ""
    return (text or type(exc).__name__)[:300]
