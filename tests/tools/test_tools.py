from __future__ import annotations

import inspect
import json
import pickle
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from toolplan import (
    RunContext,
    ToolDefinition,
    ToolError,
    ToolRegistry,
    ToolResult,
    UserError,
    execute_plan_sync,
    tool,
)
from toolplan.agent import BatchTool, PlanTool
from toolplan.tools import ToolOutputError


class Point(BaseModel):
    x: int
    y: int = 0


@tool(read_only=True, idempotent=True, cost=2.5, timeout=3, concurrency=4, general=True)
async def locate(name: str, zoom: int = 1, tags: list[str] | None = None) -> Point:
    """Find a place on the map.

    Args:
        name: What to look for,
            possibly spanning lines.
        zoom: Zoom level.
        tags: Optional filters.
    """
    return Point(x=len(name) * zoom)


def test_schema_description_and_annotations_from_the_function() -> None:
    d = locate.definition
    assert d.name == "locate"
    assert d.description == "Find a place on the map."
    assert d.parameters_json_schema == {
        "additionalProperties": False,
        "properties": {
            "name": {"description": "What to look for, possibly spanning lines.", "type": "string"},
            "zoom": {"default": 1, "description": "Zoom level.", "type": "integer"},
            "tags": {
                "anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}],
                "default": None,
                "description": "Optional filters.",
            },
        },
        "required": ["name"],
        "type": "object",
    }
    assert d.output_json_schema is not None and d.output_json_schema["required"] == ["x"]
    a = d.annotations
    assert (a.read_only, a.idempotent, a.cost, a.timeout, a.concurrency, a.general, a.retries) == (
        True,
        True,
        2.5,
        3,
        4,
        True,
        2,
    )


async def test_coercion_validation_and_jsonable_output() -> None:
    assert (await locate.execute("locate", {"name": "abc", "zoom": "2"})).content == {"x": 6, "y": 0}
    with pytest.raises(ToolError, match="missing required argument 'name'"):
        await locate.execute("locate", {})
    assert (await locate.execute("locate", {"name": "ab"})).content == {"x": 2, "y": 0}


def test_plain_functions_are_tools_and_names_are_unique() -> None:
    def area(w: float, h: float) -> float:
        """Area."""
        return w * h

    registry = ToolRegistry([area])
    assert registry.names == ["area"] and registry.definition("area").description == "Area."
    with pytest.raises(UserError, match="Duplicate tool name 'area'"):
        registry.add(area)
    renamed = ToolRegistry({"rect_area": area})
    assert renamed.names == ["rect_area"]


def test_bad_tool_declarations_are_user_errors() -> None:
    with pytest.raises(UserError, match="idempotent=True"):

        @tool(retry=3)
        def unsafe() -> None: ...

    with pytest.raises(UserError, match=r"\*args"):

        @tool
        def star(*args: int) -> None: ...

    with pytest.raises(UserError, match="Invalid tool name"):
        tool(name="has space")(lambda: None)


class Calculator:
    """A multi-function tool (like an MCP server): definitions() + execute(name, args)."""

    def definitions(self) -> Sequence[ToolDefinition]:
        number = {"type": "number"}
        schema = {"type": "object", "properties": {"a": number, "b": number}, "required": ["a", "b"]}
        return (
            ToolDefinition(name="add", description="a + b", parameters_json_schema=schema),
            ToolDefinition(name="div", description="a / b", parameters_json_schema=schema),
        )

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        a, b = arguments["a"], arguments["b"]
        if name == "add":
            return ToolResult(a + b)
        if b == 0:
            return ToolResult.failure("Division by zero: pass a non-zero 'b'.")
        return ToolResult(a / b)


def test_multi_function_tools_in_plans_with_json_schema_validation() -> None:
    registry = ToolRegistry([Calculator(), locate])
    assert registry.names == ["add", "div", "locate"]
    bad = {"steps": [{"id": "x", "tool": "add", "arguments": {"a": "one"}}]}
    from toolplan import validate_plan

    errors = validate_plan(bad, registry).errors
    assert [e.code for e in errors] == ["invalid_arguments", "invalid_arguments"]
    assert "'b' is a required property" in " ".join(e.message for e in errors)
    plan = {
        "steps": [
            {"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "q", "tool": "div", "arguments": {"a": "$ref:s", "b": 0}},
            {"id": "r", "tool": "div", "arguments": {"a": "$ref:s", "b": 2}},
        ]
    }
    result = execute_plan_sync(plan, registry)
    assert result.steps["s"].output == 3 and result.steps["r"].output == 1.5
    q = result.steps["q"]
    assert q.error is not None and (q.error.kind, q.error.message) == (
        "business",
        "Division by zero: pass a non-zero 'b'.",
    )


async def test_meta_tools_are_ordinary_tools() -> None:
    registry = ToolRegistry([Calculator()])
    plan_tool = PlanTool(registry)
    (definition,) = plan_tool.definitions()
    assert definition.name == "execute_tool_plan"
    assert definition.parameters_json_schema["properties"]["steps"]["items"]["properties"]["tool"]["enum"] == [
        "add",
        "div",
    ]
    ok = await plan_tool.execute(
        "execute_tool_plan",
        {
            "steps": [
                {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 1}},
                {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 1}},
            ],
            "output_steps": ["b"],
        },
    )
    assert json.loads(ok.content) == {"status": "succeeded", "outputs": {"b": 3}}
    invalid = await plan_tool.execute("execute_tool_plan", {"steps": [{"id": "a", "tool": "execute_plan"}]})
    assert invalid.error is not None and "meta_tool" in invalid.error

    batch = BatchTool(registry)
    assert batch.definitions()[0].parameters_json_schema["properties"]["steps"]["maxItems"] == 50
    out = await batch.execute(
        "execute_plan",
        {"steps": [{"tool": "div", "args": {"a": 1, "b": 0}}, {"tool": "add", "args": {"a": 1, "b": 2}}]},
    )
    assert json.loads(out.content) == [
        {"step": 0, "tool": "div", "status": "error", "error": "Division by zero: pass a non-zero 'b'."},
        {"step": 1, "tool": "add", "status": "ok", "result": 3},
    ]


@tool
def stock(item: str, warehouse: str = "main") -> int:
    """Units of ``item`` in stock."""
    return len(item) + len(warehouse)


def test_a_decorated_sync_function_is_still_the_function() -> None:
    assert stock("apple") == 9
    assert stock("apple", warehouse="b") == 6
    assert stock(item="pear", warehouse="east") == 8
    assert stock.function("apple") == 9
    assert inspect.signature(stock) == inspect.signature(stock.function)
    assert list(inspect.signature(stock).parameters) == ["item", "warehouse"]
    assert tool(stock).function is stock.function  # a tool of a tool wraps the same function
    assert tool(name="inventory")(stock)("apple") == 9


async def test_a_decorated_async_function_returns_its_coroutine() -> None:
    pending = locate("abc", zoom=2)
    assert inspect.iscoroutine(pending)
    assert await pending == Point(x=6)  # the function's own return value, not JSON


def test_calling_a_tool_directly_is_a_plain_call() -> None:
    # No validation and no coercion: Python's own errors, as for the undecorated function.
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'item'"):
        stock()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="has no len"):
        stock(5)  # type: ignore[arg-type]


def test_tools_in_plans_still_validate() -> None:
    from toolplan import validate_plan

    result = execute_plan_sync({"steps": [{"id": "s", "tool": "stock", "arguments": {"item": "apple"}}]}, [stock])
    assert result.steps["s"].output == 9
    bad = validate_plan({"steps": [{"id": "s", "tool": "stock", "arguments": {"item": 42}}]}, [stock])
    assert [e.code for e in bad.errors] == ["invalid_arguments"]


@tool
def thumbnail() -> bytes:
    """A PNG header: bytes that are not UTF-8 text."""
    return b"\x89PNG\r\n\x1a\n"


@tool
def report() -> dict[str, Any]:
    """Binary data nested in JSON-like output."""
    return {"name": "r", "pages": [b"ok", b"\xff\xfe" * 20]}


@tool
def greeting() -> bytes:
    """UTF-8 bytes: decoded to text, as before."""
    return "héllo".encode()


def test_binary_output_fails_the_step_saying_what_was_returned_and_what_to_return() -> None:
    plan: dict[str, Any] = {
        "steps": [{"id": t, "tool": t, "arguments": {}} for t in ("thumbnail", "report", "greeting")]
    }
    result = execute_plan_sync(plan, [thumbnail, report, greeting])
    assert result.steps["greeting"].status == "succeeded" and result.steps["greeting"].output == "héllo"
    png = result.steps["thumbnail"].error
    assert png is not None and png.kind == "infrastructure"
    assert "UnicodeDecodeError" not in png.message
    assert "returned 8 bytes that are not UTF-8 text (b'\\x89PNG\\r\\n\\x1a\\n')" in png.message
    assert "base64.b64encode(data).decode('ascii')" in png.message and "Return str" in png.message
    nested = result.steps["report"].error
    assert nested is not None and "40 bytes that are not UTF-8 text" in nested.message
    assert "at output['pages'][1]" in nested.message
    assert json.loads(result.to_model_text())["status"] == "failed"


async def test_binary_output_raises_a_tool_output_error_from_execute() -> None:
    with pytest.raises(ToolOutputError, match="Tool 'thumbnail' returned 8 bytes") as caught:
        await thumbnail.execute("thumbnail", {})
    assert (caught.value.code, caught.value.tool) == ("invalid_tool_output", "thumbnail")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), copy.message, copy.tool) == (ToolOutputError, caught.value.message, "thumbnail")
    assert thumbnail() == b"\x89PNG\r\n\x1a\n"  # called directly, it is just the function


def test_a_run_context_first_parameter_is_filled_in_and_left_out_of_the_schema() -> None:
    @tool
    def tagged(ctx: Annotated[RunContext[None], "the run"], /, label: str) -> str:
        """Tag a label.

        Args:
            ctx: The run (not shown to the model).
            label: What to tag.
        """
        return f"{label}@{ctx.step_id}:{ctx.attempt}"

    schema = tagged.definition.parameters_json_schema
    assert schema["properties"] == {"label": {"type": "string", "description": "What to tag."}}
    assert schema["required"] == ["label"]
    result = execute_plan_sync({"steps": [{"id": "s", "tool": "tagged", "arguments": {"label": "x"}}]}, [tagged])
    assert result.outputs == {"s": "x@s:1"}
    with pytest.raises(ToolError, match="unexpected argument 'ctx'"):
        tagged.validate_arguments("tagged", {"label": "x", "ctx": {}})
