"""An MCP server's malformed input schemas are refused at listing with a reason, never a raw exception."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
import pytest
from mcp.server import Server

from toolplan import PlanValidationError, execute_plan
from toolplan.mcp import MCPToolset

GOOD = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
BAD: dict[str, Any] = {
    "bad_pattern": {"type": "object", "properties": {"text": {"type": "string", "pattern": "["}}},
    "list_properties": {"type": "object", "properties": []},
    "unknown_type": {"type": "object", "properties": {"text": {"type": "strin"}}},
    "string_required": {"type": "object", "required": "text"},
    "negative_length": {"type": "object", "properties": {"text": {"maxLength": -1}}},
    "numeric_extra": {"type": "object", "additionalProperties": 5},
}


def _server(output_schema: dict[str, Any] | None = None) -> Server[Any]:
    tools = [mt.Tool(name=name, input_schema=schema) for name, schema in BAD.items()]
    tools.append(mt.Tool(name="echo", input_schema=GOOD, output_schema=output_schema))

    async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        text = (params.arguments or {}).get("text")
        return mt.CallToolResult(content=[mt.TextContent(text=f"{params.name}: {text}")])

    return Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_malformed_input_schemas_leave_their_tools_out_with_the_reason() -> None:
    async with MCPToolset(_server()) as toolset:
        assert [d.name for d in toolset.definitions()] == ["echo"]
        assert set(toolset.skipped) == set(BAD)
        for name, why in toolset.skipped.items():
            assert why.startswith("its input schema is not a valid JSON Schema (") and "server must fix" in why, name
        assert "properties/text/pattern" in toolset.skipped["bad_pattern"]
        assert "regular expression" in toolset.skipped["bad_pattern"]
        plan = {
            "steps": [
                {"id": "ok", "tool": "echo", "arguments": {"text": "hi"}},
                {"id": "no", "tool": "bad_pattern", "arguments": {"text": "hi"}},
            ]
        }
        with pytest.raises(PlanValidationError, match="bad_pattern"):  # a refused tool is unknown: nothing runs
            await execute_plan(plan, [toolset])
        result = await execute_plan({"steps": [plan["steps"][0]]}, [toolset])
        assert result.status == "succeeded" and result.steps["ok"].output == "echo: hi"


async def test_a_malformed_output_schema_is_dropped_and_the_tool_kept() -> None:
    async with MCPToolset(_server(output_schema={"type": "object", "properties": 3})) as toolset:
        (echo,) = toolset.definitions()
        assert echo.name == "echo" and echo.output_json_schema is None
