"""`MCPToolset`: the tools of one MCP server as a toolplan `Tool`, behind one owner task.

The SDK's client must be closed by the task that opened it (anyio's cancel scopes); a step runs in
a task of its own. So one *owner task* opens the connection, lists the tools, runs every call in a
task of its task group and closes the connection; steps hand it jobs through a queue and await a
future. Closing (from any task) asks the owner to stop and waits for it. A server that dies fails
the calls in flight; the next call connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import mcp.types as mt
from mcp import Client, MCPError, StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .._context import current_call_or_none
from .._errors import InvalidToolSchemaError, RunError, UnknownToolError, UserError
from ..tools import ToolDefinition, ToolResult
from ._convert import MCPHints, RemoteTool, convert_result, local_names, to_definition

__all__ = ("IDEMPOTENCY_META_KEY", "MCPConnectionError", "MCPToolset", "ServerLike")

log = logging.getLogger("toolplan.mcp")

# Keys of a call's ``_meta``: the step's idempotency key (the same for every attempt of a step, and
# after a resume) and where the call comes from. Trace context (``traceparent``) is added next to them.
IDEMPOTENCY_META_KEY = "toolplan/idempotencyKey"
RUN_META_KEY = "toolplan/run"
STEP_META_KEY = "toolplan/step"
ATTEMPT_META_KEY = "toolplan/attempt"

_MAX_PAGES = 1000  # tools/list pages walked at most: a server whose cursor never ends cannot hang a listing

ServerLike = Server[Any] | MCPServer | StdioServerParameters | Client | str


class MCPConnectionError(RunError):
    """An MCP server could not be reached, or its connection failed or closed during a call.

    A step whose call ends so fails as an infrastructure error; the toolset connects again on its
    next call.
    """

    code = "mcp_connection_error"


MCPConnectionError.__module__ = "toolplan.mcp"  # public there


@dataclass(slots=True, eq=False)
class _Job:
    """One call handed to the owner task."""

    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any]
    future: asyncio.Future[mt.CallToolResult]
    context: contextvars.Context  # the caller's: trace context and any other context variable reach the call
    task: asyncio.Task[None] | None = None

    def cancelled(self, _future: asyncio.Future[mt.CallToolResult]) -> None:
        if _future.cancelled() and self.task is not None:
            self.task.cancel()  # the step was cancelled (or timed out): so is the call


@dataclass(slots=True, eq=False)
class _Refresh:
    """A request to list the tools again."""

    done: asyncio.Future[None]


@dataclass(slots=True, eq=False)
class _Connection:
    """One owner task's connection (a toolset may open several over its life, one at a time)."""

    jobs: asyncio.Queue[_Job | _Refresh | None] = field(default_factory=asyncio.Queue)
    ready: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    task: asyncio.Task[None] | None = None
    dead: bool = False  # the server went away: new calls open a new connection
    relist: asyncio.Event = field(default_factory=asyncio.Event)


def _label(server: Any) -> str:
    if isinstance(server, str):
        return server
    if isinstance(server, StdioServerParameters):
        return shlex.join([server.command, *server.args])
    if isinstance(server, MCPServer | Server):
        return f"in-process server {server.name!r}"
    if isinstance(server, Client):
        return f"client of {_label(server.server)}"
    return type(server).__name__


def _trusted_by_default(server: Any) -> bool:
    """Hints are believed from servers this process runs (in-process, a command), not from URLs."""
    if isinstance(server, Client):
        return _trusted_by_default(server.server)
    return not isinstance(server, str)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


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


class MCPToolset:
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

    # -- the connection -----------------------------------------------------------------------------

    async def __aenter__(self) -> MCPToolset:
        await self.connect()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    @property
    def connected(self) -> bool:
        """True while a connection is open (or opening)."""
        conn = self._conn
        return conn is not None and not conn.dead and conn.task is not None and not conn.task.done()

    async def connect(self) -> MCPToolset:
        """Open the connection (if it is not open) and list the tools.

        Raises:
            MCPConnectionError: the server cannot be reached or did not answer the listing.
        """
        await self._open()
        return self

    async def refresh(self) -> Sequence[ToolDefinition]:
        """List the server's tools again (every page) and return the new definitions."""
        conn = await self._open()
        conn.relist.clear()
        refresh = _Refresh(asyncio.get_running_loop().create_future())
        conn.jobs.put_nowait(refresh)
        await refresh.done
        return self.definitions()

    async def aclose(self) -> None:
        """Close the connection (from any task); calls in flight fail as infrastructure errors.

        Never raises for the server's sake: a server that is already gone closes quietly. The last
        listing is kept, and a later call connects again.
        """
        conn = self._conn
        if conn is None or conn.task is None:
            return
        self._conn = None
        conn.dead = True
        conn.jobs.put_nowait(None)
        # The owner ends on its own even if this wait is cancelled: nothing is left behind.
        await asyncio.shield(asyncio.wait([conn.task]))

    async def _open(self) -> _Connection:
        conn = self._conn
        if conn is None or conn.dead:
            conn = _Connection()
            self._conn = conn
            # An empty context: the owner outlives the call that happened to open it.
            conn.task = asyncio.get_running_loop().create_task(
                self._own(conn), name=f"toolplan-mcp:{self.name}", context=contextvars.Context()
            )
        await asyncio.shield(conn.ready)  # a caller cancelled while connecting leaves the owner to finish
        return conn

    async def _call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> mt.CallToolResult:
        conn = await self._open()
        loop = asyncio.get_running_loop()
        job = _Job(tool, arguments, meta, loop.create_future(), contextvars.copy_context())
        job.future.add_done_callback(job.cancelled)
        conn.jobs.put_nowait(job)
        return await job.future

    def _client(self, stack: AsyncExitStack) -> Client:
        server = self.server
        if isinstance(server, Client):
            return server
        if isinstance(server, str) and server.startswith(("http://", "https://")):
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            self._refused = None  # of this connection

            async def note_refusal(response: httpx2.Response) -> None:
                if response.status_code in (401, 403):  # the SDK's error says only "an error response"
                    self._refused = response.status_code

            # The SDK's defaults for MCP over HTTP: 30 s to connect and write, 300 s to read a stream.
            http = httpx2.AsyncClient(
                headers=self.headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [note_refusal]},
            )
            stack.push_async_callback(http.aclose)  # a client handed to the transport is ours to close
            return Client(streamable_http_client(server, http_client=http), message_handler=self._on_message)
        return Client(server, message_handler=self._on_message)

    def _refusal_message(self, status: int) -> str:
        """The server answered 401/403: the token is missing or wrong (not a server that is down)."""
        sent = any(k.lower() == "authorization" for k in self.headers)
        what = "refused the token it was sent" if sent else "wants a token, and none was sent"
        return (
            f"The MCP server {self.name!r} {what} (HTTP {status}). Give it the server's bearer token: on the "
            "command line, the TOOLPLAN_MCP_TOKEN variable (or `mcp tools --token TOKEN`); in Python, "
            "MCPToolset(url, headers={'Authorization': 'Bearer TOKEN'})."
        )

    async def _own(self, conn: _Connection) -> None:
        """The owner task: open, list, serve jobs until told to stop (or the server dies), close."""
        try:
            async with AsyncExitStack() as stack:
                client = self._client(stack)
                entered = isinstance(self.server, Client) and _is_entered(client)
                if not entered:
                    async with self._deadline("initialize"):
                        await stack.enter_async_context(client)
                await self._list(client)
                async with asyncio.TaskGroup() as tg:
                    listener = self._listen(client, conn, tg)
                    conn.ready.set_result(None)
                    await self._serve(client, conn, tg)
                    listener.cancel()
        except BaseException as exc:  # the owner reports every way it ends to its callers
            conn.dead = True
            leaf = _leaf(exc)
            if isinstance(leaf, MCPConnectionError):  # a deadline of ours, already a clear error
                error = leaf
            else:
                if conn.ready.done():
                    message = f"The connection to the MCP server {self.name!r} failed: {_describe(exc)}."
                elif self._refused is not None:
                    message = self._refusal_message(self._refused)
                else:
                    message = (
                        f"Cannot connect to the MCP server {self.name!r}: {_describe(exc)}. Check that it is running "
                        "and reachable (the URL, or the command and its environment)."
                    )
                error = MCPConnectionError(message)
            if not conn.ready.done():
                conn.ready.set_exception(error)
                conn.ready.exception()  # retrieved: a connection nobody waited for logs nothing
            self._drain(conn, error)
            if isinstance(exc, asyncio.CancelledError):
                raise
            if not isinstance(exc, Exception):
                raise
            log.debug("MCP connection to %s ended: %s", self.name, _describe(exc))
        finally:
            conn.dead = True
            if self._conn is conn:
                self._conn = None

    async def _serve(self, client: Client, conn: _Connection, tg: asyncio.TaskGroup) -> None:
        running: set[asyncio.Task[Any]] = set()
        while True:
            job = await conn.jobs.get()
            if job is None:
                break
            task: asyncio.Task[Any]
            if isinstance(job, _Refresh):
                task = tg.create_task(self._relist(client, job.done))
            elif job.future.done():  # cancelled before it started
                continue
            else:
                task = job.task = tg.create_task(self._run(client, conn, job), context=job.context)
            running.add(task)
            task.add_done_callback(running.discard)
        closed = MCPConnectionError(f"The MCP toolset {self.name!r} was closed while the call ran.")
        for running_task in running:
            running_task.cancel()
        self._drain(conn, closed)

    async def _run(self, client: Client, conn: _Connection, job: _Job) -> None:
        future = job.future
        try:
            meta = cast(mt.RequestParamsMeta, job.meta) if job.meta else None  # an open map: any keys
            result = await client.call_tool(job.tool, job.arguments, meta=meta)
        except asyncio.CancelledError:
            if not future.done():  # the toolset closed under the call (a cancelled step cancelled the future)
                future.set_exception(
                    MCPConnectionError(f"The MCP toolset {self.name!r} was closed while {job.tool!r} ran.")
                )
            raise
        except MCPError as exc:
            if exc.code == mt.CONNECTION_CLOSED:
                conn.dead = True  # the next call connects again
                if self._conn is conn:
                    self._conn = None
                conn.jobs.put_nowait(None)
                error = MCPConnectionError(
                    f"The MCP server {self.name!r} closed the connection while {job.tool!r} ran "
                    f"({exc.error.message}); whether the call had its effect is unknown."
                )
            else:
                error = MCPConnectionError(
                    f"The MCP server {self.name!r} answered the call of {job.tool!r} with a protocol error "
                    f"{exc.code}: {exc.error.message}"
                )
            if not future.done():
                future.set_exception(error)
        except Exception as exc:
            if not future.done():
                future.set_exception(
                    MCPConnectionError(
                        f"The call of {job.tool!r} on the MCP server {self.name!r} failed: {_describe(exc)}"
                    )
                )
        else:
            if not future.done():
                future.set_result(result)

    @staticmethod
    def _drain(conn: _Connection, error: MCPConnectionError) -> None:
        """Fail every job still queued on ``conn`` with ``error``."""
        while True:
            try:
                job = conn.jobs.get_nowait()
            except asyncio.QueueEmpty:
                return
            if job is None:
                continue
            target = job.done if isinstance(job, _Refresh) else job.future
            if not target.done():
                target.set_exception(error)

    # -- listing ------------------------------------------------------------------------------------

    async def _list(self, client: Client) -> None:
        """Every page of ``tools/list``, then the tools as toolplan sees them (the cache)."""
        tools: list[mt.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            async with self._deadline("tools/list"):
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        names, skipped = local_names([t.name for t in tools], self.prefix)
        listed: dict[str, RemoteTool] = {}
        for t in tools:
            local = names.get(t.name)
            if local is not None and local not in listed:
                try:
                    listed[local] = to_definition(t, local, trusted=self.trusted, timeout=self.timeout)
                except InvalidToolSchemaError as exc:  # its schema cannot be used: left out, as a bad name is
                    skipped[t.name] = (
                        f"its input schema is not a valid JSON Schema (at {exc.path or '/'}: {exc.detail}); "
                        "the server must fix it"
                    )
        for remote, why in skipped.items():
            log.warning("MCP server %s: tool %r is left out: %s.", self.name, remote, why)
        self._tools, self.skipped, self._listed = listed, skipped, True

    async def _relist(self, client: Client, done: asyncio.Future[None] | None = None) -> bool:
        """List again; True if that worked (``done`` is told either way)."""
        try:
            await self._list(client)
        except Exception as exc:
            if done is not None and not done.done():
                done.set_exception(
                    exc
                    if isinstance(exc, MCPConnectionError)
                    else MCPConnectionError(f"Listing the tools of {self.name!r} failed: {_describe(exc)}")
                )
            else:
                log.warning("MCP server %s: listing its tools again failed: %s", self.name, _describe(exc))
            return False
        if done is not None and not done.done():
            done.set_result(None)
        return True

    @contextlib.asynccontextmanager
    async def _deadline(self, request: str) -> AsyncIterator[None]:
        """``connect_timeout`` on one request: past it, an `MCPConnectionError` naming the server and what to check."""
        if self.connect_timeout is None:
            yield
            return
        deadline = asyncio.timeout(self.connect_timeout)
        try:
            async with deadline:
                yield
        except TimeoutError:
            if not deadline.expired():
                raise
            raise MCPConnectionError(
                f"The MCP server {self.name!r} did not answer {request} within {self.connect_timeout:g} s. "
                + self._what_to_check()
            ) from None

    def _what_to_check(self) -> str:
        server = self.server.server if isinstance(self.server, Client) else self.server
        if isinstance(server, StdioServerParameters):
            where = "that the command starts an MCP server speaking over stdio (writing nothing else to stdout)"
        elif isinstance(server, str):
            where = "that the URL is the server's MCP endpoint and the server is not stuck"
        else:
            where = "that the server is not blocked"
        return f"Check {where}; give MCPToolset(connect_timeout=...) more seconds if it is only slow."

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: a changed tool list is listed again (by the owner)."""
        if isinstance(message, mt.ToolListChangedNotification):
            conn = self._conn
            if conn is not None and not conn.dead:
                conn.relist.set()

    def _listen(self, client: Client, conn: _Connection, tg: asyncio.TaskGroup) -> asyncio.Task[None]:
        """Watch for list changes: a subscription on 2026-07-28 connections (earlier ones just notify)."""

        async def relist_on_change() -> None:
            while True:
                await conn.relist.wait()
                conn.relist.clear()
                if await self._relist(client) and self.on_tools_changed is not None:
                    self.on_tools_changed(self)

        async def subscribe() -> None:
            try:
                async with client.listen(tools_list_changed=True) as events:
                    async for _event in events:
                        pass  # each event reaches _on_message as a ToolListChangedNotification
            except Exception as exc:  # a server without subscriptions: notifications still work
                log.debug("MCP server %s: no tools/list_changed subscription: %s", self.name, _describe(exc))

        async def watch() -> None:
            async with asyncio.TaskGroup() as inner:
                inner.create_task(relist_on_change())
                caps = client.server_capabilities.tools
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS and caps is not None and caps.list_changed:
                    inner.create_task(subscribe())

        return tg.create_task(watch())


def _is_entered(client: Client) -> bool:
    try:
        client.session  # noqa: B018 - raises RuntimeError outside `async with client`
    except RuntimeError:
        return False
    return True
