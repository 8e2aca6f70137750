"""toolplan as an MCP server: the tools and ``execute_tool_plan``, called by the SDK's own client,
in process and over streamable HTTP on 127.0.0.1 (with a bearer token)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp.types as mt
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from toolplan import UserError, tool
from toolplan.mcp import MCPConnectionError, MCPToolset, create_server, serve_http
from toolplan.mcp._server import PLAN_OUTPUT_SCHEMA


@tool(read_only=True)
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    if city == "Atlantis":
        raise ValueError("no weather under the sea")
    return {"city": city, "temp": len(city) * 3}


@tool(read_only=True)
def compare(a: float, b: float) -> str:
    """Which is warmer."""
    return "first" if a > b else "second"


@tool(destructive=True)
def forget(city: str) -> str:
    """Forget a city."""
    return f"forgot {city}"


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
        {"id": "sea", "tool": "get_weather", "arguments": {"city": "Atlantis"}},
    ],
    "output_steps": ["cmp", "sea"],
}


async def test_the_served_plan_tool_answers_with_structured_output_and_progress() -> None:
    server = create_server([get_weather, compare])
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == ["get_weather", "compare", "execute_tool_plan"]
        plan_tool = listed["execute_tool_plan"]
        assert plan_tool.output_schema == PLAN_OUTPUT_SCHEMA
        assert {"steps", "output_steps", "budget"} <= plan_tool.input_schema["properties"].keys()
        assert plan_tool.annotations is not None and plan_tool.annotations.read_only_hint is True
        result = await client.call_tool("execute_tool_plan", PLAN, progress_callback=on_progress)
    assert not result.is_error
    body = result.structured_content
    assert body is not None
    assert body["status"] == "failed" and body["outputs"] == {"cmp": "second"}
    assert body["errors"]["sea"]["kind"] == "infrastructure" and "under the sea" in body["errors"]["sea"]["message"]
    assert len(seen) >= 3
    done = [p[0] for p in seen]
    assert done[0] == 0 and done[-1] == 4 and done == sorted(done)
    assert {p[1] for p in seen} == {4} and seen[0][2] == "plan started: 4 steps"


async def test_plan_annotations_come_from_the_catalogue() -> None:
    async with Client(create_server([get_weather, forget])) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    plan = tools["execute_tool_plan"].annotations
    assert plan is not None and (plan.read_only_hint, plan.destructive_hint) == (False, True)
    assert tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint is True
    weather = tools["get_weather"].annotations
    assert weather is not None and (weather.read_only_hint, weather.idempotent_hint) == (True, True)


async def test_an_invalid_plan_or_call_is_an_error_result() -> None:
    async with Client(create_server([get_weather])) as client:
        invalid = await client.call_tool("execute_tool_plan", {"steps": [{"id": "a", "tool": "nope", "arguments": {}}]})
        assert invalid.is_error and invalid.structured_content is not None
        assert invalid.structured_content["status"] == "invalid"
        assert [i["code"] for i in invalid.structured_content["issues"]] == ["unknown_tool"]
        two = {"steps": PLAN["steps"][:2], "budget": {"max_tool_calls": 1}}
        budget = await client.call_tool("execute_tool_plan", two)
        assert budget.structured_content is not None
        assert [e["status"] for e in budget.structured_content["errors"].values()] == ["not_run"]
        direct = await client.call_tool("get_weather", {"city": "Oslo"})
        assert not direct.is_error and direct.structured_content == {"city": "Oslo", "temp": 12}
        assert (await client.call_tool("get_weather", {"town": "Oslo"})).is_error
        unknown = await client.call_tool("get_wether", {})
        assert unknown.is_error and "Known tools: get_weather, execute_tool_plan" in unknown.content[0].text  # type: ignore[union-attr]


async def test_one_plan_over_several_servers() -> None:
    upstream = MCPServer("inventory", log_level="ERROR")

    @upstream.tool(annotations=mt.ToolAnnotations(read_only_hint=True))
    def stock(city: str) -> int:
        return 3 if city == "Oslo" else 0

    async with (
        MCPToolset(upstream, prefix="inv") as inventory,
        Client(create_server([inventory, get_weather])) as client,
    ):
        result = await client.call_tool(
            "execute_tool_plan",
            {
                "steps": [
                    {"id": "w", "tool": "get_weather", "arguments": {"city": "Oslo"}},
                    {"id": "s", "tool": "inv_stock", "arguments": {"city": "$ref:w.city"}},
                ]
            },
        )
    assert result.structured_content is not None
    assert result.structured_content["outputs"] == {"w": {"city": "Oslo", "temp": 12}, "s": {"result": 3}}


@contextlib.asynccontextmanager
async def http_server(sock: socket.socket, token: str | None) -> AsyncIterator[str]:
    sock.listen(100)  # connections wait in the backlog until uvicorn accepts them
    serving = asyncio.create_task(serve_http(create_server([get_weather, compare]), sock=sock, token=token))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def test_streamable_http_with_a_bearer_token(loopback_socket: socket.socket) -> None:
    async with http_server(loopback_socket, "s3cret") as url:
        async with MCPToolset(url, headers={"Authorization": "Bearer s3cret"}) as remote:
            assert not remote.trusted
            assert [d.name for d in remote.definitions()] == ["get_weather", "compare"]
            assert list(remote.skipped) == ["execute_tool_plan"]  # a plan cannot call a meta-tool
            assert (await remote.execute("get_weather", {"city": "Rome"})).content == {"city": "Rome", "temp": 12}
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        assert refused.json()["code"] == "unauthorized" and "Bearer" in refused.json()["message"]
        with pytest.raises(MCPConnectionError, match=r"refused the token it was sent \(HTTP 401\)"):
            await MCPToolset(url, headers={"Authorization": "Bearer wrong"}).connect()
        with pytest.raises(MCPConnectionError, match=r"wants a token, and none was sent \(HTTP 401\)") as info:
            await MCPToolset(url).connect()
        assert "TOOLPLAN_MCP_TOKEN" in str(info.value) and "running" not in str(info.value)


async def test_streamable_http_on_loopback_without_a_token(loopback_socket: socket.socket) -> None:
    async with http_server(loopback_socket, None) as url, MCPToolset(url, prefix="gw") as remote:
        result = await remote.execute("gw_execute_tool_plan", PLAN)  # with a prefix, a gateway's plan tool is a tool
        assert result.ok and result.content["outputs"]["cmp"] == "second"


async def test_no_token_no_network() -> None:
    with pytest.raises(UserError, match="bearer token"):
        await serve_http(create_server([get_weather]), host="0.0.0.0")
