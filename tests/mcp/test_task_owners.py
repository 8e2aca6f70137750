"""MCP tasks belong to the client that started them: two real SDK clients over each transport.

The owner is the auth identity (the bearer token), else the HTTP session (2025-11-25), else the
connection. A foreign task id answers as an unknown one; ``tasks/list`` shows only the caller's; a
stored task keeps its owner through a restart of the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from task_support import PLAN_TOOL, cancel_task, get_task, list_tasks, start_task, task_result

from toolplan import tool
from toolplan.mcp import create_server, serve_http
from toolplan.store import open_store

pytestmark = pytest.mark.anyio

gate = asyncio.Event()
began = asyncio.Event()


@tool
async def wait_for_gate(name: str) -> str:
    """Waits until the test opens the gate."""
    began.set()
    await gate.wait()
    return name


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    global gate, began
    gate = asyncio.Event()  # an event is bound to the loop that first waits on it: one per test
    began = asyncio.Event()


PLAN = {"steps": [{"id": "a", "tool": "wait_for_gate", "arguments": {"name": "a"}}]}
UNKNOWN = r"No task 'mcptask_.*' on this server"


@contextlib.asynccontextmanager
async def _http(sock: socket.socket, server: Any, token: str | None = None) -> AsyncIterator[str]:
    serving = asyncio.create_task(serve_http(server, sock=sock, token=token))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


@contextlib.asynccontextmanager
async def _with_token(url: str, token: str) -> AsyncIterator[Client]:
    """An SDK client (2026-07-28) whose requests carry ``Authorization: Bearer <token>``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


ACCEPT = {"Accept": "application/json, text/event-stream"}


class _Session:
    """A 2025-11-25 client over streamable HTTP, in raw JSON-RPC: the SDK's client validates a ``tools/call``
    answer on that protocol as a ``CallToolResult`` and so cannot start a task there."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.headers, self.n = http, url, dict(ACCEPT), 0

    async def open(self) -> _Session:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        answer = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=self.headers
        )
        self.headers.update({"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
        await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        return self

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        body = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        response = await self.http.post(self.url, json=body, headers=self.headers)
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("application/json"):
            return dict(response.json())
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))


async def test_two_http_sessions_see_only_their_own_tasks(loopback_socket: socket.socket) -> None:
    loopback_socket.listen(100)
    async with _http(loopback_socket, create_server([wait_for_gate])) as url, httpx.AsyncClient(timeout=30) as http:
        owner, other = await _Session(http, url).open(), await _Session(http, url).open()
        created = await owner.call("tools/call", {"name": PLAN_TOOL, "arguments": PLAN, "task": {"ttl": 60_000}})
        task_id = created["result"]["task"]["taskId"]
        await began.wait()
        foreign = [await other.call(m, {"taskId": task_id}) for m in ("tasks/get", "tasks/result", "tasks/cancel")]
        unknown = await other.call("tasks/get", {"taskId": task_id[:-4] + "0000"})
        listed_by_other = (await other.call("tasks/list", {}))["result"]["tasks"]
        listed_by_owner = (await owner.call("tasks/list", {}))["result"]["tasks"]
        state = (await owner.call("tasks/get", {"taskId": task_id}))["result"]
        cancelled = (await owner.call("tasks/cancel", {"taskId": task_id}))["result"]
    assert [answer["error"]["message"] for answer in foreign] == [unknown["error"]["message"].replace(
        task_id[:-4] + "0000", task_id)] * 3  # fmt: skip
    assert re.match(UNKNOWN, foreign[0]["error"]["message"])
    assert listed_by_other == [] and [t["taskId"] for t in listed_by_owner] == [task_id]
    assert state["status"] == "working" and cancelled["status"] == "cancelled"


async def test_the_bearer_token_owns_tasks_across_sessions(loopback_socket: socket.socket) -> None:
    """Over streamable HTTP with the SDK's client: start, poll, cancel and wait for tasks from two clients."""
    loopback_socket.listen(100)
    async with _http(loopback_socket, create_server([wait_for_gate]), token="secret-1") as url:
        async with _with_token(url, "secret-1") as first:
            doomed = await start_task(first.session, PLAN)
            kept = await start_task(first.session, PLAN)
        async with _with_token(url, "secret-1") as later:  # another client with the same identity
            listed = {t.task_id for t in await list_tasks(later.session)}
            working = await get_task(later.session, doomed.task_id)
            cancelled = await cancel_task(later.session, doomed.task_id)
            gate.set()
            result = await task_result(later.session, kept.task_id)
            ended = await task_result(later.session, doomed.task_id)
    assert listed == {doomed.task_id, kept.task_id}
    assert working.status == "working" and cancelled.status == "cancelled" and ended.is_error
    assert result.structured_content == {"status": "succeeded", "outputs": {"a": "a"}, "errors": {}}


async def test_a_stored_task_keeps_its_owner_through_a_restart(tmp_path: Path) -> None:
    url_db = f"sqlite:///{tmp_path / 'runs.db'}"
    gate.set()

    async def serve(run: Callable[[str], Awaitable[Any]], token: str | None = None) -> Any:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(100)
        try:
            async with (
                open_store(url_db) as store,
                _http(sock, create_server([wait_for_gate], store=store), token) as u,
            ):
                return await run(u)
        finally:
            sock.close()

    async def start_in_a_session(url: str) -> str:
        async with httpx.AsyncClient(timeout=30) as http:
            by_session = await _Session(http, url).open()
            created = await by_session.call("tools/call", {"name": PLAN_TOOL, "arguments": PLAN, "task": {}})
            task_id = str(created["result"]["task"]["taskId"])
            await by_session.call("tasks/result", {"taskId": task_id})
        return task_id

    async def start_with_token(url: str) -> str:
        async with _with_token(url, "tok") as client:
            task = await start_task(client.session, PLAN)
            await task_result(client.session, task.task_id)
            return task.task_id

    session_task = await serve(start_in_a_session)
    token_task = await serve(start_with_token, token="tok")

    async def after_restart_anonymous(url: str) -> None:
        async with Client(url) as client:  # no token, no session: the session's task is not its own
            with pytest.raises(MCPError, match=UNKNOWN):
                await get_task(client.session, session_task)
            with pytest.raises(MCPError, match=UNKNOWN):
                await get_task(client.session, token_task)
            assert await list_tasks(client.session) == []

    async def after_restart_with_token(url: str) -> mt.GetTaskResult:
        async with _with_token(url, "tok") as client:
            with pytest.raises(MCPError, match=UNKNOWN):
                await get_task(client.session, session_task)
            return await get_task(client.session, token_task)

    await serve(after_restart_anonymous)
    state = await serve(after_restart_with_token, token="tok")
    assert state.status == "completed"
