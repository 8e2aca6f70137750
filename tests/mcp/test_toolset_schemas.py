"""MCP tools keep the promises of every tool: schemas normalised when listed, calls checked at dispatch."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from toolplan import ToolRegistry, execute_plan, tool
from toolplan.mcp import MCPToolset


def catalog_server(calls: list[tuple[str, dict[str, Any]]]) -> Server:
    """A server whose tools are described in the dialects catalogs use, plus one no dialect explains."""
    tools = [
        mt.Tool(
            name="scale",
            input_schema={"type": "object", "properties": {"factor": {"type": "float"}}, "required": ["factor"]},
        ),
        mt.Tool(name="broken", input_schema={"type": "object", "properties": {"when": {"type": "Date (yyyy-mm-dd)"}}}),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        calls.append((params.name, dict(params.arguments or {})))
        return mt.CallToolResult(content=[mt.TextContent(text="done")])

    return Server("catalog", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_dialect_schemas_are_normalised_and_unusable_ones_left_out() -> None:
    async with MCPToolset(catalog_server([])) as toolset:
        assert [d.name for d in toolset.definitions()] == ["scale"]
        assert toolset.definitions()[0].parameters_json_schema == {
            "type": "object",
            "properties": {"factor": {"type": "number"}},
            "required": ["factor"],
        }
        assert "'Date (yyyy-mm-dd)'" in toolset.skipped["broken"]


async def test_a_wrong_value_through_a_reference_never_reaches_the_server() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    @tool
    def words() -> str:
        return "twice"

    async with MCPToolset(catalog_server(calls)) as toolset:
        plan = {
            "steps": [
                {"id": "w", "tool": "words", "arguments": {}},
                {"id": "bad", "tool": "scale", "arguments": {"factor": "$ref:w"}},
                {"id": "ok", "tool": "scale", "arguments": {"factor": 2}},
            ]
        }
        result = await execute_plan(plan, ToolRegistry([toolset, words]))
    error = result.steps["bad"].error
    assert error is not None and error.kind == "invalid_arguments"
    assert "argument 'factor'" in error.message and "'twice'" in error.message
    assert calls == [("scale", {"factor": 2})]
