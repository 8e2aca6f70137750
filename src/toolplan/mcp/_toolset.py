"""`MCPToolset`: the tools of one MCP server as a toolplan `Tool`.

Its connection (one owner task that opens it, lists the tools and runs every call) is in `._connection`.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from .._context import current_call_or_none
from .._errors import UnknownToolError, UserError
from ..tools import ToolDefinition, ToolResult
from ._connection import _Connection, _label, _Refresh, _ServerConnection, _trusted_by_default
from ._convert import MCPHints, RemoteTool, convert_result

__all__ = ("IDEMPOTENCY_META_KEY", "MCPToolset", "ServerLike")

# Keys of a call's ``_meta``: the step's idempotency key (the same for every attempt of a step, and
# after a resume) and where the call comes from. Trace context (``traceparent``) is added next to them.
IDEMPOTENCY_META_KEY = "toolplan/idempotencyKey"
RUN_META_KEY = "toolplan/run"
STEP_META_KEY = "toolplan/step"
ATTEMPT_META_KEY = "toolplan/attempt"

ServerLike = Server[Any] | MCPServer | StdioServerParameters | Client | str


def _trace_context(meta: dict[str, Any]) -> None:
    """Add the caller's W3C trace context (``traceparent``, ``tracestate``) to ``meta``, if there is one.

    The hook for tracing: OpenTelemetry's propagator writes nothing when no span is active. (The
    call also runs in a copy of the caller's context, so the SDK's own client span is a child of it.)
    """
    try:
        from opentelemetry.propagate import inject
    except ImportError:  # pragma: no cover - the SDK depends on opentelemetry-api
        return
    inject(meta)


class MCPToolset(_ServerConnection):
    """The tools of one MCP server, callable in plans and by agents (a multi-function `Tool`).

    ```python
    async with MCPToolset("http://127.0.0.1:8000/mcp", prefix="docs") as docs:
        result = await execute_plan(plan, [docs, my_function])
    ```

    The connection is opened by ``async with`` (or `connect`), and lazily by a call; `definitions`
    needs a listing, so connect before building a registry or an agent. It is held by one owner task:
    calls may come from any task, and `aclose` may be called from any task.

    Args:
        server: A URL (streamable HTTP), `StdioServerParameters` (see `MCPToolset.stdio`), an
            in-process ``Server`` or ``MCPServer`` (tests), or an ``mcp.Client`` (the toolset
            enters it unless it is entered already, and then leaves it to its owner).
        prefix: Put before every tool name (``prefix_name``) to avoid collisions between servers.
        parallel_mutations: Let the server's tools that are not read-only run at once. By default
            they take turns (one lock per server; read-only tools never wait): waiting for the lock
            counts against a step's timeout.
        trust_hints: Believe the server's annotations (``readOnlyHint``, ``idempotentHint``, ...).
            Default: yes for in-process servers and commands, no for URLs. The tools of an untrusted
            server are neither read-only nor idempotent for toolplan, so they are never retried or
            re-run on resume automatically; their read-only hint still spares them the lock.
        timeout: Default timeout of every call, in seconds (a step's own timeout wins).
        connect_timeout: Seconds the server has to start and answer ``initialize``, and to answer each
            page of ``tools/list`` (when connecting, on `refresh`, after a change notice). A server that
            does not fails `connect` (or the call that connects) with `MCPConnectionError`; None waits forever.
        headers: HTTP headers for a URL (e.g. ``{"Authorization": "Bearer ..."}``).
        name: How errors and logs name the server (default: its URL, command or name).
        on_tools_changed: Called after the server said its tools changed and they were listed again
            (a registry or agent built before holds the old definitions: build it again).
        deferred: Keep the server's tools out of the model's tool list: it finds them with
            ``search_tools`` (see `ToolRegistry.add`).
    """

    def __init__(
        self,
        server: ServerLike,
        *,
        prefix: str | None = None,
        parallel_mutations: bool = False,
        trust_hints: bool | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = 30.0,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        on_tools_changed: Callable[[MCPToolset], None] | None = None,
        deferred: bool = False,
    ) -> None:
        if isinstance(server, str) and not server.startswith(("http://", "https://")):
            raise UserError(
                f"MCPToolset({server!r}): a string must be an http(s) URL of a streamable-HTTP server. "
                'For a command use MCPToolset.stdio("python server.py").'
            )
        if headers and not isinstance(server, str):
            raise UserError("MCPToolset(headers=...) applies to URLs only; this server is not one.")
        if prefix is not None and not prefix.replace("_", "").replace("-", "").isalnum():
            raise UserError(f"MCPToolset(prefix={prefix!r}): use letters, digits, '_' or '-'.")
        if timeout is not None and timeout <= 0:
            raise UserError(f"MCPToolset(timeout={timeout!r}): use a positive number of seconds, or None.")
        if connect_timeout is not None and not connect_timeout > 0:
            raise UserError(
                f"MCPToolset(connect_timeout={connect_timeout!r}): use a positive number of seconds, or None."
            )
        self.server = server
        self.prefix = prefix or None
        self.parallel_mutations = parallel_mutations
        self.trusted = _trusted_by_default(server) if trust_hints is None else trust_hints
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.headers = dict(headers or {})
        self.name = name or _label(server)
        self.on_tools_changed = on_tools_changed
        self.deferred = deferred
        self._tools: dict[str, RemoteTool] = {}
        self._listed = False
        self.skipped: dict[str, str] = {}
        """Tools of the server left out, by the server's name: why (an invalid or taken name)."""
        self._conn: _Connection | None = None
        self._refused: int | None = None  # a 401/403 answer while connecting (a missing or wrong token)
        self._lock: asyncio.Lock | None = None  # the server's mutation lock (made in the running loop)
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def stdio(
        cls,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **options: Any,
    ) -> MCPToolset:
        """A toolset of the server that ``command`` starts, spoken to over its stdin and stdout.

        ``command`` is split like a shell would (``"python server.py --flag"``) unless it is a list.
        ``options`` are `MCPToolset`'s.
        """
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise UserError("MCPToolset.stdio() needs a command, e.g. 'python server.py'.")
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(env) if env else None, cwd=cwd)
        return cls(params, **options)

    # -- the Tool protocol ------------------------------------------------------------------------

    def definitions(self) -> Sequence[ToolDefinition]:
        """The server's tools as toolplan sees them (from the last listing).

        Raises:
            UserError: the toolset never connected (``async with toolset:`` or ``await toolset.connect()`` first).
        """
        if not self._listed:
            raise UserError(
                f"The MCP toolset {self.name!r} has not listed its tools yet: connect it before building a "
                "registry or an agent, with `async with toolset:` or `await toolset.connect()`."
            )
        return [t.definition for t in self._tools.values()]

    def hints(self, name: str) -> MCPHints:
        """What the server claims about tool ``name`` (its toolplan name), spec defaults applied."""
        return self._remote(name).hints

    def remote_name(self, name: str) -> str:
        """The server's name of tool ``name`` (its toolplan name)."""
        return self._remote(name).remote

    def _remote(self, name: str) -> RemoteTool:
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownToolError(name, list(self._tools))
        return tool

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call tool ``name`` on the server.

        An MCP error result is a business error (a failed `ToolResult`); a protocol or transport
        failure raises (an infrastructure error). The call's ``_meta`` carries the step's
        idempotency key and trace context; an empty ``idempotency_key``/``idempotencyKey`` argument
        of the tool's schema is filled with that key.
        """
        tool = self._remote(name)
        call = current_call_or_none()
        meta: dict[str, Any] = {}
        args = dict(arguments)
        if call is not None:
            key = call.idempotency_key
            meta = {IDEMPOTENCY_META_KEY: key, RUN_META_KEY: call.run_id, STEP_META_KEY: call.step_id}
            meta[ATTEMPT_META_KEY] = call.attempt
            for argument in tool.fill:
                if args.get(argument) in (None, ""):
                    args[argument] = key
        _trace_context(meta)
        if tool.hints.read_only or self.parallel_mutations:
            result = await self._call(tool.remote, args, meta)
        else:
            loop = asyncio.get_running_loop()
            if self._lock is None or self._lock_loop is not loop:  # a lock serves one event loop
                self._lock, self._lock_loop = asyncio.Lock(), loop
            async with self._lock:
                result = await self._call(tool.remote, args, meta)
        return convert_result(result, name)

    # -- listing ----------------------------------------------------------------------------------------

    async def refresh(self) -> Sequence[ToolDefinition]:
        """List the server's tools again (every page) and return the new definitions."""
        conn = await self._open()
        conn.relist.clear()
        refresh = _Refresh(asyncio.get_running_loop().create_future())
        conn.jobs.put_nowait(refresh)
        await refresh.done
        return self.definitions()
