"""`OpenAPIToolset`: one tool per operation of an OpenAPI 3.0/3.1 document, called through `HttpPolicy`."""

from __future__ import annotations

import base64
import importlib
import json
import logging
import os
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import quote, urlencode

from .._context import current_call_or_none
from .._errors import InvalidToolSchemaError, OpenAPISpecError, ToolError, UnknownToolError, UserError
from .._json import JSONTextError, loads
from ..tools import FunctionTool, SchemaTool, ToolAnnotations, ToolResult, Toolset
from ._fetch import _HEADER_NAME, HttpPolicy, HttpResponse, import_httpx
from ._openapi_spec import Operation, method_annotations, parse_spec

__all__ = ("APIKeyAuth", "BasicAuth", "BearerAuth", "OpenAPIToolset")

_log = logging.getLogger("toolplan.builtin")
_MiB = 1024 * 1024
_EXCERPT = 500  # characters of an error response's body given to the model
_ACCEPT = "application/json, text/plain;q=0.9, */*;q=0.8"


@dataclass(frozen=True, slots=True)
class BearerAuth:
    """``Authorization: Bearer TOKEN`` on every call."""

    token: str


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """HTTP basic authentication (``Authorization: Basic ...``) on every call."""

    username: str
    password: str


@dataclass(frozen=True, slots=True)
class APIKeyAuth:
    """An API key sent on every call as the header, query parameter or cookie ``name``."""

    name: str
    value: str
    location: Literal["header", "query", "cookie"] = "header"


Auth = BearerAuth | BasicAuth | APIKeyAuth


class OpenAPIToolset(Toolset):
    """One tool per operation of an OpenAPI 3.0 or 3.1 document; calls go over HTTP under `HttpPolicy`.

    ``spec`` is the document (a dict) or the path of a JSON (or, with PyYAML installed, YAML) file; use
    `OpenAPIToolset.from_url` to fetch it. Each operation's path, query, header and cookie parameters
    and its request body become one JSON Schema (see docs/openapi.md for the folding rule and names).
    Operations that cannot be used are left out and listed in ``skipped`` with the reason.

    Requests go only to the base URL's host (and ``allow_hosts``); loopback and private addresses are
    refused unless ``allow_private_networks``; redirects to another origin drop every header, the
    credentials included. ``auth`` is set by you and never appears in a tool's schema. A JSON response
    comes back parsed, any other as text; an answer of 400 or more is a business error with the status
    and an excerpt of the body.

    Args:
        spec: The OpenAPI document, or the path of a file holding it.
        base_url: Where the API is (default: the document's first ``servers`` URL).
        auth: Credentials for every call: `BearerAuth`, `BasicAuth`, `APIKeyAuth`, or several of them.
        allow_hosts: More hosts calls may go to (redirect targets); the base URL's host always may.
        allow_private_networks: Let the hosts be on loopback or private networks.
        include: Keep only the operations these select: an ``operationId`` or tool name, ``tag:NAME``,
            a path pattern (``/pets/*``), or a method and a path pattern (``GET /pets/*``).
        exclude: Leave out the operations these select (same forms).
        annotations: Per operation (``operationId`` or tool name): annotations replacing the ones the
            method gives (``GET``/``HEAD`` read-only and idempotent, ``PUT``/``DELETE`` idempotent,
            ``DELETE`` destructive).
        headers: Sent with every call (dropped on a redirect to another origin).
        forward_headers: Header names safe to send on after a redirect to another origin.
        timeout: Seconds for one call, redirects included.
        max_response_bytes: Largest response body read; a longer one fails the call.
        max_request_bytes: Largest request body sent.
        max_redirects: Redirects followed per call.
        verify: TLS verification: True (the system's CAs), False, or an ``ssl.SSLContext``.
        max_spec_bytes: Largest document file read.
        idempotency_header: A header (``"Idempotency-Key"``) that carries the call's idempotency key
            (``"{run_id}:{step_id}"``, the same across retries and resumes) on ``POST`` and ``PATCH``
            calls, for APIs that de-duplicate requests. None (the default) sends none.
        prefix: Put in front of every tool name.
        deferred: Keep the operations out of the model's tool list: it finds them with
            ``search_tools`` (see `ToolRegistry.add`).

    Raises:
        OpenAPISpecError: The document cannot be read or is not OpenAPI 3.0/3.1.
        UserError: No base URL (the document names no server and ``base_url`` is not given), or an option
            is out of range.
    """

    def __init__(
        self,
        spec: Mapping[str, Any] | str | os.PathLike[str],
        *,
        base_url: str | None = None,
        auth: Auth | Sequence[Auth] | None = None,
        allow_hosts: Iterable[str] = (),
        allow_private_networks: bool = False,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = (),
        annotations: Mapping[str, ToolAnnotations] | None = None,
        headers: Mapping[str, str] | None = None,
        forward_headers: Iterable[str] = (),
        timeout: float = 30.0,
        max_response_bytes: int = _MiB,
        max_request_bytes: int = _MiB,
        max_redirects: int = 5,
        verify: ssl.SSLContext | bool = True,
        max_spec_bytes: int = 32 * _MiB,
        idempotency_header: str | None = None,
        prefix: str = "",
        deferred: bool = False,
        _spec_url: str | None = None,
    ) -> None:
        httpx = import_httpx("OpenAPIToolset")
        document = _read_file(spec, max_spec_bytes) if isinstance(spec, (str, os.PathLike)) else spec
        parsed = parse_spec(
            document,
            include=None if include is None else _strings(include, "include"),
            exclude=_strings(exclude, "exclude"),
            prefix_length=len(prefix),
        )
        self.title = parsed.title  #: the document's ``info.title``
        self.base_url = _base_url(httpx, base_url, parsed.servers, _spec_url)  #: where calls go
        self.skipped: dict[str, str] = dict(parsed.skipped)  #: operations left out ("GET /path") and why
        self.notes: dict[str, tuple[str, ...]] = {}  #: per tool: what was simplified in its schema
        self._auth = _auth_list(auth)
        if idempotency_header is not None and not _HEADER_NAME.fullmatch(str(idempotency_header)):
            raise UserError(f"OpenAPIToolset(idempotency_header={idempotency_header!r}) is not a header name.")
        self._idempotency_header = idempotency_header
        self.policy = HttpPolicy(
            allow_hosts=(
                _host_rule(httpx.URL(self.base_url)),
                *((allow_hosts,) if isinstance(allow_hosts, str) else allow_hosts),
            ),
            allow_private_networks=allow_private_networks,
            headers=dict(headers or {}),
            forward_headers=(forward_headers,) if isinstance(forward_headers, str) else tuple(forward_headers),
            timeout=timeout,
            max_response_bytes=max_response_bytes,
            max_request_bytes=max_request_bytes,
            max_redirects=max_redirects,
            verify=verify,
            tool=f"{prefix}{parsed.title or 'openapi'}"[:64],
        )
        super().__init__([], prefix=prefix, deferred=deferred)
        overrides = dict(annotations or {})
        tools: dict[str, SchemaTool] = {}
        for op in parsed.operations:
            name = prefix + op.name
            try:
                tools[name] = SchemaTool(
                    name,
                    op.description,
                    op.parameters,
                    _bind(self, op),
                    annotations=self._annotations(op, overrides, timeout),
                )
            except InvalidToolSchemaError as exc:
                self.skipped[f"{op.method} {op.path}"] = exc.detail
                continue
            if op.notes:
                self.notes[name] = op.notes
        self._functions = cast("dict[str, FunctionTool[Any]]", tools)
        self._operations = {prefix + op.name: op for op in parsed.operations if prefix + op.name in tools}
        if self.skipped:
            shown = "; ".join(f"{label}: {why}" for label, why in list(self.skipped.items())[:3])
            more = f" (and {len(self.skipped) - 3} more: see .skipped)" if len(self.skipped) > 3 else ""
            _log.warning("OpenAPI %r: %d operation(s) left out: %s%s", self.title, len(self.skipped), shown, more)

    @classmethod
    async def from_url(
        cls, url: str, *, allow_private_networks: bool = False, max_spec_bytes: int = 32 * _MiB, **options: Any
    ) -> OpenAPIToolset:
        """Fetch the document at ``url`` (under the same safety rules as calls) and make the toolset.

        A relative or missing ``servers`` URL is taken relative to ``url``. ``options`` are those of
        the constructor. Raises `OpenAPISpecError` when the document cannot be fetched or read.
        """
        httpx = import_httpx("OpenAPIToolset")
        try:
            target = httpx.URL(url)
        except Exception as exc:
            raise OpenAPISpecError(f"{url[:200]!r} is not a URL ({exc}).") from None
        try:
            policy = HttpPolicy(
                allow_hosts=(_host_rule(target),),
                allow_private_networks=allow_private_networks,
                max_response_bytes=max_spec_bytes,
                tool="OpenAPIToolset",
            )
            response = await policy.fetch("GET", url, headers={"Accept": "application/json, application/yaml"})
        except (ToolError, UserError, ConnectionError, TimeoutError, httpx.HTTPError) as exc:
            raise OpenAPISpecError(f"The OpenAPI document at {url[:200]!r} cannot be fetched: {exc}") from None
        if response["truncated"]:
            raise OpenAPISpecError(f"The OpenAPI document at {url[:200]!r} is larger than {max_spec_bytes} bytes.")
        document = response["json"] if "json" in response else _parse_text(response.get("text", ""), url)
        return cls(document, allow_private_networks=allow_private_networks, _spec_url=response["url"] or url, **options)

    def operation(self, name: str) -> tuple[str, str]:
        """``(METHOD, path)`` of the tool ``name``."""
        op = self._operations.get(name)
        if op is None:
            raise UnknownToolError(name, self.names)
        return op.method, op.path

    def _annotations(self, op: Operation, overrides: Mapping[str, ToolAnnotations], timeout: float) -> ToolAnnotations:
        for key in (op.operation_id, op.name):
            if key is not None and key in overrides:
                chosen = overrides[key]
                return chosen if chosen.timeout is not None else replace(chosen, timeout=timeout + 5)
        read_only, idempotent, destructive = method_annotations(op.method)
        # The call's own deadline is `timeout`; the tool's timeout is a backstop a little later.
        return ToolAnnotations(read_only=read_only, idempotent=idempotent, destructive=destructive, timeout=timeout + 5)

    async def call_operation(self, op: Operation, arguments: Mapping[str, Any]) -> Any:
        """Send one call of ``op`` with checked ``arguments``; its parsed body or a `ToolResult` error."""
        path = op.path
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {"Accept": _ACCEPT}
        cookies: list[str] = []
        fields: dict[str, Any] = {}
        for argument in op.arguments:
            if argument.name not in arguments:
                continue
            value = arguments[argument.name]
            if argument.location == "body":
                if op.body_argument is None:
                    fields[argument.wire] = value
                continue
            if value is None:
                if argument.location == "path":
                    return ToolResult.failure(f"The path parameter {argument.name!r} needs a value, not null.")
                continue
            if argument.location == "path":
                text = _scalar(value)
                if text in ("", ".", ".."):
                    return ToolResult.failure(f"The path parameter {argument.name!r} cannot be {text!r}.")
                path = path.replace("{" + argument.wire + "}", quote(text, safe=""))
            elif argument.location == "query":
                query.extend(_query_pairs(argument.wire, value))
            elif argument.location == "header":
                headers[argument.wire] = _scalar(value)
            else:
                cookies.append(f"{argument.wire}={quote(_scalar(value), safe='')}")
        for auth in self._auth:
            _apply(auth, headers, query, cookies)
        if self._idempotency_header is not None and op.method in ("POST", "PATCH"):
            call = current_call_or_none()
            if call is not None:
                headers[self._idempotency_header] = call.idempotency_key
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        data, content_type = _body(op, arguments, fields)
        url = self.base_url + path + ("?" + urlencode(query) if query else "")
        response = await self.policy.fetch(
            op.method, url, headers=headers, body=data, content_type=content_type, check_status=False
        )
        return _outcome(op, response, self.policy.max_response_bytes)


def _bind(toolset: OpenAPIToolset, op: Operation) -> Any:
    async def call(**arguments: Any) -> Any:
        return await toolset.call_operation(op, arguments)

    call.__name__ = op.name
    return call


def _host_rule(url: Any) -> str:
    """The ``allow_hosts`` entry of ``url``'s host and port (an IPv6 address in brackets)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port else host


def _strings(values: Iterable[str], option: str) -> list[str]:
    items = [values] if isinstance(values, str) else list(values)
    for item in items:
        if not isinstance(item, str) or not item:
            raise UserError(f"OpenAPIToolset({option}=...): each entry is a non-empty string, got {item!r}.")
    return items


def _read_file(spec: str | os.PathLike[str], limit: int) -> Any:
    text_path = os.fspath(spec)
    if isinstance(text_path, str) and text_path.startswith(("http://", "https://")):
        raise UserError(
            f"OpenAPIToolset({text_path[:200]!r}): to fetch a document, use `await OpenAPIToolset.from_url(url)`."
        )
    path = Path(text_path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise OpenAPISpecError(f"The OpenAPI file {text_path!r} is {size} bytes; the limit is {limit}.")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OpenAPISpecError(f"The OpenAPI file {text_path!r} does not exist. Check the path.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAPISpecError(f"The OpenAPI file {text_path!r} cannot be read: {exc}.") from None
    return _parse_text(text, text_path)


def _parse_text(text: str, where: str) -> Any:
    """JSON text, or YAML text when PyYAML is installed."""
    try:
        return loads(text)
    except JSONTextError as exc:
        if text.lstrip().startswith(("{", "[")) or exc.exceeds_limit:
            raise OpenAPISpecError(f"The OpenAPI document {where[:200]!r} is not usable JSON: {exc.message}.") from None
    try:
        yaml: Any = importlib.import_module("yaml")  # PyYAML, when installed (not a dependency)
    except ImportError:
        raise OpenAPISpecError(
            f"The OpenAPI document {where[:200]!r} is not JSON; to read YAML, install PyYAML (pip install pyyaml) "
            "or convert it to JSON."
        ) from None
    try:
        return yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError and the recursion of hostile nesting
        detail = " ".join(str(exc).split())[:300]
        raise OpenAPISpecError(f"The OpenAPI document {where[:200]!r} is neither JSON nor YAML: {detail}.") from None


def _base_url(httpx: Any, given: str | None, servers: list[str], spec_url: str | None) -> str:
    candidate = given if given is not None else (servers[0] if servers else None)
    if candidate is None and spec_url is None:
        raise UserError(
            "The OpenAPI document names no server: pass OpenAPIToolset(..., base_url='https://api.example.com')."
        )
    try:
        url = httpx.URL(spec_url).join(candidate or "/") if spec_url else httpx.URL(candidate)
    except Exception as exc:
        raise UserError(f"The API's base URL {str(candidate)[:200]!r} is not a URL ({exc}).") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise UserError(
            f"The API's base URL {str(url)[:200]!r} is not an absolute http(s) URL; pass base_url='https://...'."
        )
    return str(url.copy_with(query=None, fragment=None)).rstrip("/")


def _auth_list(auth: Auth | Sequence[Auth] | None) -> tuple[Auth, ...]:
    items: tuple[Any, ...] = () if auth is None else (auth,) if not isinstance(auth, Sequence) else tuple(auth)
    for item in items:
        if not isinstance(item, (BearerAuth, BasicAuth, APIKeyAuth)):
            raise UserError(
                f"OpenAPIToolset(auth=...): use BearerAuth, BasicAuth or APIKeyAuth, got {type(item).__name__}."
            )
        if isinstance(item, APIKeyAuth) and item.location not in ("header", "query", "cookie"):
            raise UserError(f"APIKeyAuth(location={item.location!r}): use 'header', 'query' or 'cookie'.")
    return items


def _apply(auth: Auth, headers: dict[str, str], query: list[tuple[str, str]], cookies: list[str]) -> None:
    if isinstance(auth, BearerAuth):
        headers["Authorization"] = f"Bearer {auth.token}"
    elif isinstance(auth, BasicAuth):
        pair = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {pair}"
    elif auth.location == "header":
        headers[auth.name] = auth.value
    elif auth.location == "query":
        query.append((auth.name, auth.value))
    else:
        cookies.append(f"{auth.name}={quote(auth.value, safe='')}")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_scalar(v) for v in value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _query_pairs(name: str, value: Any) -> list[tuple[str, str]]:
    """OpenAPI's default query style (form, exploded): a list repeats the name, an object gives its pairs."""
    if isinstance(value, list):
        return [(name, _scalar(v)) for v in value if v is not None]
    if isinstance(value, dict):
        return [(str(k), _scalar(v)) for k, v in value.items() if v is not None]
    return [(name, _scalar(value))]


def _body(op: Operation, arguments: Mapping[str, Any], fields: dict[str, Any]) -> tuple[bytes | None, str | None]:
    if op.body is None:
        return None, None
    if op.body_argument is not None:
        if op.body_argument not in arguments:
            return None, None
        payload = arguments[op.body_argument]
    else:
        payload = fields
    if op.body == "json":
        return json.dumps(payload, ensure_ascii=False, allow_nan=False).encode(), op.content_type
    if op.body == "form":
        pairs = payload.items() if isinstance(payload, dict) else ()
        return urlencode([(str(k), _scalar(v)) for k, v in pairs if v is not None]).encode(), op.content_type
    return _scalar(payload).encode(), f"{op.content_type}; charset=utf-8"


def _outcome(op: Operation, response: HttpResponse, limit: int) -> Any:
    status = response["status"]
    if "json" in response:
        content: Any = response["json"]
    elif "text" in response:
        content = response["text"]
    else:
        content = {"content_type": response["content_type"], "base64": response.get("base64", "")}
    if response["truncated"]:
        return ToolResult.failure(
            f"{op.method} {op.path} answered with more than {limit} bytes (status {status}); ask for less, e.g. a "
            "smaller page or a filter.",
            content={"status": status, "excerpt": str(response.get("text", ""))[:_EXCERPT]},
        )
    if status >= 400:
        excerpt = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        excerpt = excerpt[:_EXCERPT]
        return ToolResult.failure(
            f"{op.method} {op.path} answered {status}: {excerpt or '(no body)'}. Check the arguments against "
            "the tool's description.",
            content={"status": status, "body": excerpt},
        )
    return None if response["bytes"] == 0 else content
