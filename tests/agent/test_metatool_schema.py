"""The plan tool's schema with each tool's arguments (small catalogs): what a schema-driven model reads."""

from __future__ import annotations

from typing import Any

from toolplan.agent._metatools import DETAILED_PLAN_SCHEMA_MAX_TOOLS, _plan_schema


def _variants(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    items = schema["properties"]["steps"]["items"]
    return {v["properties"]["tool"]["const"]: v["properties"]["arguments"] for v in items["anyOf"]}


def test_definitions_move_to_the_top_under_the_tools_name() -> None:
    old_style: dict[str, Any] = {
        "type": "object",
        "properties": {"p": {"$ref": "#/definitions/Point"}},
        "required": ["p"],
        "definitions": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    schema = _plan_schema(["draw"], parameters={"draw": old_style})
    assert _variants(schema)["draw"]["properties"]["p"] == {"$ref": "#/$defs/draw__Point"}
    assert schema["$defs"] == {"draw__Point": old_style["definitions"]["Point"]}
    assert "definitions" not in _variants(schema)["draw"]


def test_a_schema_that_cannot_be_moved_leaves_the_arguments_open() -> None:
    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    schema = _plan_schema(["tree", "flat"], parameters={"tree": recursive, "flat": {"type": "object"}})
    variants = _variants(schema)
    assert variants["tree"] == {"type": "object", "description": variants["tree"]["description"]}
    assert "$ref" in variants["tree"]["description"] and "$defs" not in schema


def test_names_only_without_parameters_or_beyond_the_limit() -> None:
    names = [f"t{i}" for i in range(DETAILED_PLAN_SCHEMA_MAX_TOOLS + 1)]
    few, many = _plan_schema(names[:2]), _plan_schema(names, parameters={n: {"type": "object"} for n in names})
    for schema, listed in ((few, names[:2]), (many, names)):
        step = schema["properties"]["steps"]["items"]
        assert "anyOf" not in step and step["properties"]["tool"]["enum"] == listed
        arguments = step["properties"]["arguments"]
        assert arguments["type"] == "object" and "properties" not in arguments
