"""The connection of an `MCPToolset` to its server, behind one owner task, and the listing of its tools.

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
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Self, cast

import mcp.types as mt
from mcp import Client, MCPError, StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InvalidToolSchemaError, RunError
from ._convert import RemoteTool, local_names, to_definition

__all__ = ("MCPConnectionError",)

log = logging.getLogger("toolplan.mcp")

_MAX_PAGES = 1000  # tools/list pages walked at most: a server whose cursor never ends cannot hang a listing


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


class _ServerConnection:
    """What `MCPToolset` does to reach its server: the owner task, its jobs, and the listing of the tools."""

    server: Any
    name: str
    prefix: str | None
    trusted: bool
    timeout: float | None
    connect_timeout: float | None
    headers: dict[str, str]
    on_tools_changed: Callable[[Any], None] | None  # called with the toolset
    skipped: dict[str, str]
    _tools: dict[str, RemoteTool]
    _listed: bool
    _conn: _Connection | None
    _refused: int | None

    # -- the connection -----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    @property
    def connected(self) -> bool:
        """True while a connection is open (or opening)."""
        conn = self._conn
        return conn is not None and not conn.dead and conn.task is not None and not conn.task.done()

    async def connect(self) -> Self:
        """Open the connection (if it is not open) and list the tools.

        Raises:
            MCPConnectionError: the server cannot be reached or did not answer the listing.
        """
        await self._open()
        return self

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
