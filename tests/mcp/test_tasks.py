"""``execute_tool_plan`` as an MCP task, in process: handle, progress, result, cancel, list, bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from task_support import PLAN_TOOL, cancel_task, get_task, list_tasks, start_task, task_result

from toolplan import tool
from toolplan.mcp import create_server, serve_http

pytestmark = pytest.mark.anyio

gate = asyncio.Event()
both_began = asyncio.Event()
began: list[str] = []
stopped: list[str] = []


@tool
async def double(x: int) -> int:
    """Twice x."""
    return 2 * x


@tool
async def wait_for_gate(name: str) -> str:
    """Waits until the test opens the gate."""
    began.append(name)
    if len(began) == 2:
        both_began.set()
    try:
        await gate.wait()
    except asyncio.CancelledError:
        stopped.append(name)
        raise
    return name


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    global gate, both_began
    gate = asyncio.Event()  # an event is bound to the loop that first waits on it: one per test
    both_began = asyncio.Event()
    began.clear()
    stopped.clear()


def _gated_plan() -> dict[str, Any]:
    return {
        "steps": [
            {"id": "a", "tool": "double", "arguments": {"x": 1}},
            {"id": "b", "tool": "wait_for_gate", "arguments": {"name": "b"}},
            {"id": "c", "tool": "wait_for_gate", "arguments": {"name": "c"}},
            {"id": "d", "tool": "double", "arguments": {"x": "$ref:a"}, "depends_on": ["b"]},
        ],
    }


async def test_a_task_answers_at_once_shows_progress_and_gives_the_synchronous_result() -> None:
    server = create_server([double, wait_for_gate])
    async with Client(server) as client:
        task = await start_task(client.session, _gated_plan())
        assert task.status == "working" and task.ttl == 60_000 and task.task_id.startswith("mcptask_")
        await both_began.wait()
        state = await get_task(client.session, task.task_id)
        assert state.status == "working" and state.status_message == "running: 1/4 steps done"
        assert [t.task_id for t in await list_tasks(client.session)] == [task.task_id]
        gate.set()
        result = await task_result(client.session, task.task_id)
        done = await get_task(client.session, task.task_id)
        assert done.status == "completed" and done.status_message == "completed: 4/4 steps done"
        synchronous = await client.call_tool(PLAN_TOOL, _gated_plan())
    assert result.structured_content == synchronous.structured_content
    assert result.structured_content is not None and result.structured_content["status"] == "succeeded"
    assert result.content == synchronous.content and not result.is_error


async def test_cancel_stops_running_tools_and_every_step_ends_on_record() -> None:
    server = create_server([double, wait_for_gate])
    async with Client(server) as client:
        task = await start_task(client.session, _gated_plan())
        await both_began.wait()
        cancelled = await cancel_task(client.session, task.task_id)
        assert cancelled.status == "cancelled"
        assert sorted(stopped) == ["b", "c"]
        result = await task_result(client.session, task.task_id)
        with pytest.raises(MCPError, match="has ended \\(cancelled\\): there is nothing to cancel"):
            await cancel_task(client.session, task.task_id)
    body = result.structured_content
    assert result.is_error and body is not None and body["status"] == "cancelled"
    assert {sid: e["status"] for sid, e in body["errors"].items()} == {
        "b": "cancelled",
        "c": "cancelled",
        "d": "not_run",
    }
    assert body["outputs"] == {} or "a" not in body["errors"]


async def test_an_invalid_plan_task_fails_and_runs_nothing() -> None:
    async with Client(create_server([double, wait_for_gate])) as client:
        task = await start_task(client.session, {"steps": [{"id": "a", "tool": "nope", "arguments": {}}]})
        result = await task_result(client.session, task.task_id)
        state = await get_task(client.session, task.task_id)
    assert state.status == "failed" and result.is_error
    assert result.structured_content is not None and result.structured_content["status"] == "invalid"
    assert began == []


async def test_the_live_tasks_are_capped_and_finished_ones_forgotten_after_their_ttl() -> None:
    async with Client(create_server([double, wait_for_gate], max_tasks=1)) as client:
        first = await start_task(client.session, _gated_plan(), ttl=0)
        with pytest.raises(MCPError, match="runs at most 1 tasks at once"):
            await start_task(client.session, _gated_plan())
        assert (await get_task(client.session, first.task_id)).status == "working"  # a live task is kept
        await cancel_task(client.session, first.task_id)
        with pytest.raises(MCPError, match=r"No task 'mcptask_.*' on this server"):
            await get_task(client.session, first.task_id)
        gate.set()
        second = await start_task(client.session, _gated_plan(), ttl=10**12)
        assert second.ttl == 86_400_000  # the server's maximum


async def test_only_the_plan_tool_runs_as_a_task_and_says_so() -> None:
    async with Client(create_server([double])) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        request_task = client.session.send_request
        import mcp.types as mt

        call = mt.CallToolRequest(
            params=mt.CallToolRequestParams(name="double", arguments={"x": 1}, task=mt.TaskMetadata())
        )
        with pytest.raises(MCPError, match="does not run as a task"):
            await request_task(call, mt.CreateTaskResult)
        with pytest.raises(MCPError, match="No task 'nope'"):
            await get_task(client.session, "nope")
    assert set(tools) == {"double", PLAN_TOOL}


ACCEPT = {"Accept": "application/json, text/event-stream"}


def _message(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a streamable-HTTP POST (a JSON body, or the data of an event stream)."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return dict(response.json())
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


async def test_a_2025_11_25_client_over_http(loopback_socket: socket.socket) -> None:
    loopback_socket.listen(100)
    serving = asyncio.create_task(serve_http(create_server([double, wait_for_gate]), sock=loopback_socket))
    url = f"http://127.0.0.1:{loopback_socket.getsockname()[1]}/mcp"
    client_info = {"name": "raw", "version": "1"}
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client_info}
            answer = await http.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=ACCEPT
            )
            session = {
                **ACCEPT,
                "mcp-session-id": answer.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            capabilities = _message(answer)["result"]["capabilities"]
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)

            async def call(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
                body = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
                return _message(await http.post(url, json=body, headers=session))

            tools = (await call(2, "tools/list", {}))["result"]["tools"]
            plan = {"steps": [{"id": "a", "tool": "double", "arguments": {"x": 4}}]}
            created = await call(3, "tools/call", {"name": PLAN_TOOL, "arguments": plan, "task": {"ttl": 5000}})
            task_id = created["result"]["task"]["taskId"]
            result = await call(4, "tasks/result", {"taskId": task_id})
            state = await call(5, "tasks/get", {"taskId": task_id})
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    execution = {t["name"]: t.get("execution") for t in tools}
    assert execution == {"double": None, "wait_for_gate": None, PLAN_TOOL: {"taskSupport": "optional"}}
    assert created["result"]["task"]["status"] == "working" and created["result"]["task"]["ttl"] == 5000
    assert result["result"]["structuredContent"] == {"status": "succeeded", "outputs": {"a": 8}, "errors": {}}
    assert state["result"]["status"] == "completed"
