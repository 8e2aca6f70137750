"""The whole story: a 1,000-operation OpenAPI catalogue and two MCP servers behind search_tools.

In an agent (the model finds and plans over the right tools while its first request carries only
search_tools and execute_tool_plan), and through ``toolplan mcp serve --search`` to a real MCP client.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from toolplan import Agent, ToolRegistry
from toolplan.builtin import OpenAPIToolset
from toolplan.mcp import MCPToolset
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionModel
from toolplan.testing._models import FunctionInfo

ROOT = Path(__file__).resolve().parents[2]
KV_SERVER = ROOT / "examples" / "mcp" / "kv_server.py"


def _catalog() -> Any:
    # bench/ is not importable from the tests (tests/bench is a package of that name): load the file.
    spec = importlib.util.spec_from_file_location("openapi_catalog", ROOT / "bench" / "openapi_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


synthetic_spec = _catalog().synthetic_spec


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with what it was: method, path and body."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        data = json.dumps({"method": self.command, "path": self.path, "body": body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def weather_server() -> MCPServer:
    server = MCPServer("weather", log_level="ERROR")

    @server.tool(annotations=mt.ToolAnnotations(read_only_hint=True))
    def forecast(city: str) -> dict[str, Any]:
        """Tomorrow's weather forecast for a city: temperature and sky."""
        return {"city": city, "temp_c": 21, "sky": "clear"}

    return server


def notify_server() -> MCPServer:
    server = MCPServer("notify", log_level="ERROR")

    @server.tool()
    def send_sms(phone: str, text: str) -> str:
        """Send a text message (SMS) to a phone number."""
        return f"sent to {phone}: {text}"

    return server


def call(name: str, arguments: dict[str, Any], call_id: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=json.dumps(arguments)),))


@pytest.mark.slow
async def test_an_agent_finds_and_plans_over_a_thousand_operations_and_two_mcp_servers(api_url: str) -> None:
    api = OpenAPIToolset(synthetic_spec(1000), base_url=api_url, allow_private_networks=True, deferred=True)
    async with (
        MCPToolset(weather_server(), prefix="weather", deferred=True) as weather,
        MCPToolset(notify_server(), prefix="notify", deferred=True) as notify,
    ):
        registry = ToolRegistry([api, weather, notify])
        assert len(registry.deferred_names) == 1002
        searches = ["approve a pending invoice in billing", "weather forecast for a city", "send a text message"]

        def model_turn(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage | str:
            replies = [m for m in messages if isinstance(m, ToolReturnMessage)]
            if len(replies) < len(searches):
                return call("search_tools", {"query": searches[len(replies)], "limit": 3}, f"s{len(replies)}")
            if len(replies) == len(searches):
                found = [json.loads(r.content)["tools"][0]["name"] for r in replies]
                steps = [
                    {"id": "ok", "tool": found[0], "arguments": {"id": "inv-7"}},
                    {"id": "sky", "tool": found[1], "arguments": {"city": "Lisbon"}},
                    {
                        "id": "tell",
                        "tool": found[2],
                        "arguments": {"phone": "+351", "text": "{{ok.path}} approved; Lisbon: {{sky.sky}}"},
                    },
                ]
                return call("execute_tool_plan", {"steps": steps, "output_steps": ["tell"]}, "plan")
            return replies[-1].content

        model = FunctionModel(model_turn)
        result = await Agent(model, tools=registry, tool_planning=True).run("Approve invoice inv-7 and text me.")
    first = [t.name for t in model.requests[0].tools]
    assert first == ["execute_tool_plan", "search_tools"]
    lists = [[t.name for t in r.tools] for r in model.requests]
    for before, after in itertools.pairwise(lists):  # each list extends the last: prompt caches hold
        assert after[: len(before)] == before
    assert lists[-1][2] == "billing_approve_invoice" and "notify_send_sms" in lists[-1]
    assert "weather_forecast" in [t.name for t in model.requests[-1].tools]
    assert json.loads(result.output) == {
        "status": "succeeded",
        "outputs": {"tell": {"result": "sent to +351: /v1/billing/invoices/inv-7/approve approved; Lisbon: clear"}},
    }


@pytest.mark.slow
def test_mcp_serve_search_lists_two_tools_over_a_thousand(tmp_path: Path) -> None:
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(synthetic_spec(1000)), encoding="utf-8")
    tools = tmp_path / "tools.py"
    tools.write_text('def shout(text: str) -> str:\n    """Upper-case a text."""\n    return text.upper()\n')
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolplan", "mcp", "serve", "--search", "--search-by", "words", "--tools", str(tools),
              "--openapi", str(spec), "--mcp-upstream", f"{sys.executable} {KV_SERVER}"],
        env={"PYTHONPATH": pythonpath},
        cwd=str(tmp_path),
    )  # fmt: skip

    async def session() -> tuple[list[str], list[str], Any, bool]:
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            found = await client.call_tool("search_tools", {"query": "store a value under a key", "limit": 3})
            found_names = [t["name"] for t in json.loads(found.content[0].text)["tools"]]  # type: ignore[union-attr]
            plan = {
                "steps": [
                    {"id": "save", "tool": "put", "arguments": {"key": "greeting", "value": "hello"}},
                    {"id": "read", "tool": "get", "arguments": {"key": "greeting"}, "depends_on": ["save"]},
                    {"id": "loud", "tool": "shout", "arguments": {"text": "$ref:read.result"}},
                ],
                "output_steps": ["loud"],
            }
            result = await client.call_tool("execute_tool_plan", plan)
            unknown = await client.call_tool("no_such_tool", {})
            return names, found_names, result.structured_content, unknown.is_error

    import asyncio

    names, found, body, unknown_is_error = asyncio.run(session())
    assert names == ["search_tools", "execute_tool_plan"]
    assert "put" in found
    assert body == {"status": "succeeded", "outputs": {"loud": "HELLO"}, "errors": {}}
    assert unknown_is_error
