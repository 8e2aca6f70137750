"""toolplan as an MCP server: each tool, and ``execute_tool_plan`` over all of them (a plan gateway).

Built on the SDK's low-level ``Server``: toolplan's tools come with JSON Schemas already. A plan's
call reports progress once when it starts and once per finished step, and answers with structured
output (``status``, ``outputs``, ``errors``). With upstream MCP toolsets among the tools, any MCP
client gets one ``execute_tool_plan`` over many servers' tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import secrets
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp.types as mt
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings

from .._errors import PlanValidationError, ToolplanError, UserError
from .._json import dumps
from .._tasks import task_group
from ..agent import PLAN_TOOL_NAME, SEARCH_TOOL_NAME, PlanTool, SearchTool
from ..execute import DEFAULT_MAX_VALUE_CHARS, PlanEvent, PlanResult, PlanStarted, RunLimits, StepFinished, ToolInvoker
from ..execute._internal import cap_text
from ..plan import META_TOOL_NAMES
from ..tools import ToolDefinition, ToolRegistry, ToolSearch, ToolsLike
from ._convert import mcp_annotations
from ._taskboard import DEFAULT_MAX_TASKS, STDIO_OWNER, TASKS_EXTENSION, TaskBoard

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..store import Store

__all__ = ("PLAN_OUTPUT_SCHEMA", "create_server", "serve_http", "serve_stdio")

_BUDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Limits on the plan: steps that would exceed them end not_run.",
    "properties": {
        "max_tool_calls": {"type": "integer", "minimum": 0},
        "max_tool_calls_per_tool": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "max_cost": {"type": "number", "minimum": 0},
        "max_latency": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds."},
        "warn_at": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "Warn once when this share of a limit is spent (such as 0.8); sets no limit.",
        },
    },
}

PLAN_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["succeeded", "failed", "cancelled", "invalid"]},
        "outputs": {"type": "object", "description": "Output step id -> its value (long values are cut)."},
        "errors": {
            "type": "object",
            "description": "Step id -> why it did not succeed.",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "status": {"type": "string"},
                    "kind": {"type": "string"},
                    "message": {"type": "string"},
                },
                "required": ["status", "kind", "message"],
            },
        },
        "issues": {"type": "array", "description": "Why an invalid plan was rejected (nothing ran)."},
    },
    "required": ["status", "outputs", "errors"],
}


def _object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An output schema MCP clients accept (an object at the root), else None (no structured output)."""
    if schema is None or schema.get("type") != "object":
        return None
    return dict(schema)


def _plan_annotations(definitions: list[ToolDefinition]) -> mt.ToolAnnotations:
    """``execute_tool_plan``'s hints from the catalogue: read-only only if every tool is, and so on."""
    annotations = [d.annotations for d in definitions]
    read_only = bool(annotations) and all(a.read_only for a in annotations)
    return mt.ToolAnnotations(
        title="Run a tool plan",
        read_only_hint=read_only,
        destructive_hint=False if read_only else any(a.destructive for a in annotations),
        idempotent_hint=bool(annotations) and all(a.read_only or a.idempotent for a in annotations),
    )


class _Gateway:
    """The handlers of one served catalogue."""

    def __init__(
        self,
        tools: ToolsLike,
        limits: RunLimits | None,
        max_value_chars: int,
        store: Store | None = None,
        search: ToolSearch | None = None,
    ) -> None:
        registry = ToolRegistry.of(tools).without(*META_TOOL_NAMES)
        if search is not None:  # every tool deferred: the client sees search_tools and execute_tool_plan
            everything = ToolRegistry()
            everything.add_all(registry, deferred=True)
            registry = everything
        self.search_tool = SearchTool(registry, search) if search is not None else None
        self.registry = registry
        self.limits = limits or RunLimits()
        self.max_value_chars = max_value_chars
        self.plan_tool = PlanTool(registry, limits=self.limits, max_value_chars=max_value_chars, store=store)
        self.listing = self._listing()

    def _listing(self) -> list[mt.Tool]:
        definitions = self.registry.definitions()
        if self.search_tool is not None:
            definitions = list(self.search_tool.definitions())
        out = [
            mt.Tool(
                name=d.name,
                description=d.description or None,
                input_schema=dict(d.parameters_json_schema),
                output_schema=_object_schema(d.output_json_schema),
                annotations=mcp_annotations(d.annotations),
            )
            for d in definitions
        ]
        plan = self.plan_tool.definitions()[0]
        schema = dict(plan.parameters_json_schema)
        schema["properties"] = {**schema["properties"], "budget": _BUDGET_SCHEMA}
        out.append(
            mt.Tool(
                name=PLAN_TOOL_NAME,
                description=plan.description,
                input_schema=schema,
                output_schema=PLAN_OUTPUT_SCHEMA,
                annotations=_plan_annotations([self.registry.definition(n) for n in self.registry.names]),
                execution=mt.ToolExecution(task_support="optional"),
            )
        )
        return out

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=self.listing)

    async def call_tool(self, ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == PLAN_TOOL_NAME:
            return await self._plan(ctx, arguments)
        if params.name == SEARCH_TOOL_NAME and self.search_tool is not None:
            return await self._search(self.search_tool, arguments)
        return await self._tool(params.name, arguments)

    async def _tool(self, name: str, arguments: dict[str, Any]) -> mt.CallToolResult:
        if name not in self.registry:
            if self.search_tool is not None:
                return _error(f"Unknown tool {name[:100]!r}. Find tools with {SEARCH_TOOL_NAME}.")
            known = ", ".join([*self.registry.names, PLAN_TOOL_NAME])
            return _error(f"Unknown tool {name[:100]!r}. Known tools: {known}.")
        problems = self.registry.argument_problems(name, arguments)
        if problems:
            return _error(f"Invalid arguments for {name!r}: " + "; ".join(problems))
        invoker = ToolInvoker.for_limits(self.registry, self.limits)
        outcome = await invoker.call(
            name, arguments, timeout=invoker.timeout_for(name), run_id=f"mcp_{secrets.token_hex(8)}", step_id="call"
        )
        if outcome.error is not None:
            return _error(cap_text(outcome.error.message, self.max_value_chars))
        output = outcome.output
        structured = output if isinstance(output, dict) and self._has_output_schema(name) else None
        text = output if isinstance(output, str) else dumps(output)
        return mt.CallToolResult(content=[mt.TextContent(text=text)], structured_content=structured)

    async def _search(self, search_tool: SearchTool, arguments: dict[str, Any]) -> mt.CallToolResult:
        text, is_error = await search_tool.run(arguments)
        return _error(text) if is_error else mt.CallToolResult(content=[mt.TextContent(text=text)])

    def _has_output_schema(self, name: str) -> bool:
        return _object_schema(self.registry.definition(name).output_json_schema) is not None

    async def _plan(self, ctx: ServerRequestContext[Any], arguments: dict[str, Any]) -> mt.CallToolResult:
        events: asyncio.Queue[PlanEvent | None] = asyncio.Queue()
        async with task_group() as tg:
            tg.create_task(_report_progress(ctx, events))
            try:
                return await self.run_plan(arguments, events.put_nowait)
            finally:
                events.put_nowait(None)

    async def run_plan(
        self, arguments: dict[str, Any], on_event: Callable[[PlanEvent], None], *, run_id: str | None = None
    ) -> mt.CallToolResult:
        """Validate and run a plan: its ``CallToolResult`` (the same called directly or as a task)."""
        try:
            result = await self.plan_tool.run(arguments, on_event=on_event, run_id=run_id)
        except PlanValidationError as exc:
            issues = [i.to_dict() for i in exc.issues]
            body = {"status": "invalid", "outputs": {}, "errors": {}, "issues": issues}
            return mt.CallToolResult(content=[mt.TextContent(text=exc.message)], structured_content=body, is_error=True)
        except ToolplanError as exc:  # a limit out of range, a store that failed: said, not raised
            return _error(exc.message)
        return self.plan_result(result)

    def plan_result(self, result: PlanResult) -> mt.CallToolResult:
        """A finished plan's ``CallToolResult``: its body as text and as structured output."""
        body = self.plan_body(result)
        return mt.CallToolResult(content=[mt.TextContent(text=dumps(body))], structured_content=body)

    @staticmethod
    def error(message: str) -> mt.CallToolResult:
        return _error(message)

    def plan_body(self, result: PlanResult) -> dict[str, Any]:
        limit = self.max_value_chars
        errors = {
            sid: {"status": step.status, "kind": step.error.kind, "message": cap_text(step.error.message, limit)}
            for sid, step in result.steps.items()
            if step.error is not None
        }
        return {"status": result.status, "outputs": result.summary(max_value_chars=limit)["outputs"], "errors": errors}


async def _report_progress(ctx: ServerRequestContext[Any], events: asyncio.Queue[PlanEvent | None]) -> None:
    """Progress notifications of a plan: when it starts, then one per finished step."""
    total: float | None = None
    done = 0
    while (event := await events.get()) is not None:
        if isinstance(event, PlanStarted):
            total = len(event.steps)
            message = f"plan started: {total} step{'s' if total != 1 else ''}"
        elif isinstance(event, StepFinished):
            done += 1
            message = f"step {event.result.id!r} ({event.result.tool}) {event.result.status}"
        else:
            continue
        with contextlib.suppress(Exception):  # a client that stopped listening does not stop the plan
            await ctx.session.report_progress(done, total, message)


def _error(message: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(text=message)], is_error=True)


def create_server(
    tools: ToolsLike,
    *,
    name: str = "toolplan",
    limits: RunLimits | None = None,
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
    instructions: str | None = None,
    store: Store | None = None,
    max_tasks: int = DEFAULT_MAX_TASKS,
    search: ToolSearch | bool = False,
) -> Server[Any]:
    """An MCP server offering ``tools`` and ``execute_tool_plan`` over them.

    Args:
        tools: The catalogue: functions, `Tool` objects (connected `MCPToolset` s among them), a registry.
        name: The server's name, as clients show it.
        limits: Limits of every plan and call (a plan's own merge in; the tighter wins).
        max_value_chars: Longest value (and error message) in a result.
        instructions: What the server tells clients about itself (default: when to plan).
        search: List only ``search_tools`` and ``execute_tool_plan`` (True, or a `ToolSearch` to say
            how to rank): clients find the tools they need by searching, and still call any tool (or
            plan over it) by name. For catalogues too large to list. See docs/tool-search.md.
        store: A durable store (`toolplan.store.open_store`): every plan's run is stored, and a task's id
            is its run id, so a task outlives a restart of the server (finished: answered from the store;
            cut off: resumed, its finished steps not run again).
        max_tasks: How many plans may run at once as MCP tasks (``tools/call`` with ``task``).

    Serve it with `serve_stdio` or `serve_http`, or connect to it in-process (``mcp.Client(server)``).
    """
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or not 1 <= max_tasks <= 10_000:
        raise UserError(f"max_tasks must be a whole number from 1 to 10000, not {max_tasks!r}.")
    finder = search if isinstance(search, ToolSearch) else ToolSearch() if search else None
    gateway = _Gateway(tools, limits, max_value_chars, store, finder)
    default = f"Call {PLAN_TOOL_NAME} to run several tool calls in one turn: independent steps run in parallel."
    if finder is not None:
        default = f"Call {SEARCH_TOOL_NAME} to find the tools you need, then call them, or {PLAN_TOOL_NAME} over them."
    board = TaskBoard(gateway, store, max_tasks)
    server = _TaskServer(
        name,
        instructions=instructions or default,
        lifespan=board.lifespan,
        on_list_tools=gateway.list_tools,
        on_call_tool=gateway.call_tool,
    )
    server.middleware.append(board.middleware)
    server.add_request_handler("tasks/get", mt.GetTaskRequestParams, board.get)
    server.add_request_handler("tasks/result", mt.GetTaskPayloadRequestParams, board.result)
    server.add_request_handler("tasks/cancel", mt.CancelTaskRequestParams, board.cancel)
    server.add_request_handler("tasks/list", mt.PaginatedRequestParams, board.list)
    server.extensions[TASKS_EXTENSION] = {}
    return server


class _TaskServer(Server[Any]):
    """The low-level server, advertising tasks: ``tasks`` (2025-11-25) and the tasks extension (2026-07-28)."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> mt.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        tasks = mt.ServerTasksCapability(
            list=mt.TasksListCapability(),
            cancel=mt.TasksCancelCapability(),
            requests=mt.ServerTasksRequestsCapability(tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())),
        )
        return capabilities.model_copy(update={"tasks": tasks})


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    token = STDIO_OWNER.set("stdio")  # its tasks are its one client's, before and after a restart
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        STDIO_OWNER.reset(token)


_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(host: str) -> _Address | None:
    """The address ``host`` spells, or None for a name.

    Any spelling: ``[::1]``, ``0:0:0:0:0:0:0:1``; an IPv4-mapped IPv6 address is its IPv4 one.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_localhost(name: str) -> bool:
    return name.strip().lower().rstrip(".") == "localhost"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost), however they are spelled."""
    if _is_localhost(host):
        return True
    address = _address(host)
    return address is not None and address.is_loopback


class _BearerAuth:
    """Every HTTP request needs ``Authorization: Bearer <token>`` (compared in constant time)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                body = dumps(
                    {
                        "code": "unauthorized",
                        "message": "Missing or wrong bearer token: send 'Authorization: Bearer <token>' with the "
                        "token the server was started with (--token or TOOLPLAN_MCP_TOKEN).",
                        "details": {},
                    }
                ).encode()
                headers = [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _authority_host(authority: str) -> str | None:
    """The host of a ``Host`` header value or an origin's authority (``[::1]:8000`` -> ``::1``), None if malformed."""
    if authority.startswith("["):
        end = authority.find("]")
        host, rest = authority[1:end], authority[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return host
    host, colon, port = authority.partition(":")
    if colon and not port.isdigit():
        return None
    return host


class _HostGuard:
    """A loopback server answers only requests that name it.

    ``Host`` (and ``Origin``, when a browser sends one) must be the bound address, compared as an address, or
    ``localhost`` when that reaches it. A web page whose name was re-pointed at this machine (DNS rebinding), or
    which posts here from its own origin, is refused.
    """

    def __init__(self, app: ASGIApp, bound: _Address | None) -> None:
        self.app = app
        if bound is None:  # bound by the name localhost: whichever loopback address it resolved to
            self.addresses: frozenset[_Address] = frozenset(
                {ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1")}
            )
        else:
            self.addresses = frozenset({bound})
        # localhost resolves to 127.0.0.1 or ::1: it names this server only when bound there
        self.localhost = bool(self.addresses & {ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1")})

    def _names_this_server(self, authority: str) -> bool:
        host = _authority_host(authority)
        if host is None:
            return False
        if _is_localhost(host):
            return self.localhost
        address = _address(host)
        return address is not None and address in self.addresses

    def _origin_ok(self, origin: str) -> bool:
        scheme, sep, authority = origin.partition("://")
        return bool(sep) and scheme.lower() in ("http", "https") and self._names_this_server(authority)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers", ()))
            host = headers.get(b"host", b"").decode("latin-1")
            origin = headers.get(b"origin")
            if not self._names_this_server(host):
                await _refuse(
                    send,
                    421,
                    "wrong_host",
                    f"The Host header {host[:100]!r} does not name this server: a loopback MCP server answers "
                    "requests addressed to its own address (or localhost when bound to 127.0.0.1 or ::1).",
                )
                return
            if origin is not None and not self._origin_ok(origin.decode("latin-1")):
                await _refuse(
                    send,
                    403,
                    "forbidden_origin",
                    f"Requests from the web origin {origin.decode('latin-1')[:100]!r} are refused: a loopback MCP "
                    "server answers clients on this machine, not web pages.",
                )
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = dumps({"code": code, "message": message, "details": {}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_http(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    path: str = "/mcp",
    sock: socket.socket | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``server`` over streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled (a graceful stop).

    Args:
        server: What `create_server` made.
        host: The address to listen on.
        port: The port to listen on.
        token: A bearer token every request must carry. Required when the address is not a loopback
            address: toolplan never serves tools to the network without authentication. On a loopback
            address, requests must also name the server (``Host``, and ``Origin`` when sent, is the bound
            address or ``localhost``), so web pages cannot reach it by DNS rebinding.
        path: Where the MCP endpoint is.
        sock: A bound socket to serve on instead of ``host:port`` (tests bind port 0 first).
        log_level: uvicorn's log level.

    Raises:
        UserError: The address (``host``, or ``sock``'s) reaches beyond this machine and no ``token`` was given.
    """
    import uvicorn

    bound = str(sock.getsockname()[0]) if sock is not None else host
    if not token and not is_loopback(bound):
        raise UserError(
            f"Serving MCP on {bound} reaches beyond this machine: give a bearer token (--token, or "
            "TOOLPLAN_MCP_TOKEN) that clients send as 'Authorization: Bearer <token>', or bind 127.0.0.1."
        )
    # One Host/Origin rule for every spelling of an address (the SDK's own check goes by spelling): _HostGuard
    no_sdk_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: Any = server.streamable_http_app(streamable_http_path=path, host=host, transport_security=no_sdk_check)
    if token:
        app = _BearerAuth(app, token)
    if is_loopback(bound):
        app = _HostGuard(app, _address(bound))
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", timeout_graceful_shutdown=5)
    userver = uvicorn.Server(config)
    serving = asyncio.ensure_future(userver.serve(sockets=[sock] if sock is not None else None))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:  # cancelled: stop as on Ctrl-C (open streams close, the lifespan ends)
        userver.should_exit = True
        await serving
        raise
