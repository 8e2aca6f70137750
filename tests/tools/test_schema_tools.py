"""Tools from JSON Schemas keep @tool's promises: one contract, dialects normalised, calls checked at dispatch."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolplan import (
    InvalidToolSchemaError,
    Tool,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    UserError,
    execute_plan,
    execute_plan_sync,
    tool,
    validate_plan,
)
from toolplan.agent import Agent, CodeTool
from toolplan.execute import ToolInvoker, execute_plan_stream
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import ScriptedModel
from toolplan.tools import Toolset


class HandWritten:
    """A tool written against the `Tool` protocol: a definition with a JSON Schema, and ``execute``."""

    def __init__(self, name: str, schema: Mapping[str, Any], function: Any = None) -> None:
        self.name = name
        self.schema = schema
        self.function = function or (lambda **kw: kw)
        self.calls: list[dict[str, Any]] = []

    def definitions(self) -> Sequence[ToolDefinition]:
        return [ToolDefinition(name=self.name, parameters_json_schema=self.schema)]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls.append(dict(arguments))
        return ToolResult(self.function(**arguments))


POWER = {"type": "object", "properties": {"base": {"type": "integer"}}, "required": ["base"]}


def calls(*items: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(items))
    )


# -- one tool contract ------------------------------------------------------------------------------


def test_from_schema_makes_a_tool_that_gets_keyword_arguments() -> None:
    seen: list[dict[str, Any]] = []

    def square(**arguments: Any) -> int:
        seen.append(arguments)
        return int(arguments["base"]) ** 2

    square_tool = Tool.from_schema("square", "Square a number.", POWER, square)
    assert isinstance(square_tool, Tool)
    assert square_tool.definition.description == "Square a number."
    result = execute_plan_sync({"steps": [{"id": "s", "tool": "square", "arguments": {"base": 7}}]}, [square_tool])
    assert result.steps["s"].output == 49
    assert seen == [{"base": 7}]


def test_from_schema_takes_async_functions_and_an_output_schema() -> None:
    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    shout_tool = Tool.from_schema(
        "shout",
        "",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        shout,
        output_schema={"type": "string"},
    )
    assert shout_tool.definition.output_json_schema == {"type": "string"}
    result = execute_plan_sync({"steps": [{"id": "s", "tool": "shout", "arguments": {"text": "hi"}}]}, [shout_tool])
    assert result.steps["s"].output == "HI"


@pytest.mark.parametrize("name", ["get.weather", "get weather", "x" * 80, "", "wetter:"])
def test_from_schema_has_the_name_rules_of_tool(name: str) -> None:
    with pytest.raises(UserError, match="Invalid tool name"):
        Tool.from_schema(name, "", POWER, lambda base: base)


@pytest.mark.parametrize("name", ["get.weather", "get weather", "x" * 80])
def test_a_registry_refuses_bad_names_of_hand_written_tools(name: str) -> None:
    with pytest.raises(UserError, match="Invalid tool name"):
        ToolRegistry([HandWritten(name, POWER)])


def test_a_toolset_from_a_list_of_openai_definitions() -> None:
    got: list[tuple[str, dict[str, Any]]] = []

    def handler(name: str, arguments: dict[str, Any]) -> Any:
        got.append((name, arguments))
        return {"name": name, **arguments}

    definitions = [
        {"type": "function", "function": {"name": "find_city", "description": "Find.", "parameters": POWER}},
        {
            "name": "rate",
            "description": "Rate.",
            "parameters": {"type": "object", "properties": {"n": {"type": "float"}}},
        },
    ]
    catalog = Toolset.from_definitions(definitions, handler)
    assert catalog.names == ["find_city", "rate"]
    plan = {
        "steps": [
            {"id": "a", "tool": "find_city", "arguments": {"base": 2}},
            {"id": "b", "tool": "rate", "arguments": {"n": "$ref:a.base"}},
        ]
    }
    result = execute_plan_sync(plan, [catalog])
    assert result.ok, result.errors
    assert sorted(got) == [("find_city", {"base": 2}), ("rate", {"n": 2})]
    assert ToolRegistry([catalog]).get("rate").parameters_json_schema == {  # type: ignore[union-attr]
        "type": "object",
        "properties": {"n": {"type": "number"}},
    }


# -- schema dialects --------------------------------------------------------------------------------

DIALECTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "dict, float, tuple, any": (
        {
            "type": "dict",
            "properties": {
                "a": {"type": "float"},
                "b": {"type": "tuple", "items": [{"type": "int"}, {"type": "str"}]},
                "c": {"type": "any"},
                "d": {"type": "list", "items": {"type": "bool"}},
            },
        },
        {
            "type": "object",
            "properties": {
                "a": {"type": "number"},
                "b": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
                "c": {},
                "d": {"type": "array", "items": {"type": "boolean"}},
            },
        },
    ),
    "optional and required flags": (
        {
            "type": "object",
            "properties": {"a": {"type": "string", "required": True}, "b": {"type": "string", "optional": True}},
            "required": ["b"],
        },
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]},
    ),
    "openapi nullable": (
        {"type": "object", "properties": {"a": {"type": "string", "nullable": True, "enum": ["x", "y"]}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"], "enum": ["x", "y", None]}}},
    ),
    "draft-04 exclusive bounds, id, definitions": (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": "http://example.com/t",
            "type": "object",
            "properties": {
                "a": {
                    "type": "number",
                    "maximum": 5,
                    "exclusiveMaximum": True,
                    "minimum": 0,
                    "exclusiveMinimum": False,
                },
                "b": {"$ref": "#/definitions/B"},
            },
            "definitions": {"B": {"type": "string"}},
        },
        {
            "type": "object",
            "properties": {
                "a": {"type": "number", "exclusiveMaximum": 5, "minimum": 0},
                "b": {"$ref": "#/$defs/B"},
            },
            "$defs": {"B": {"type": "string"}},
        },
    ),
    "draft-07 dependencies, additionalItems": (
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": [{"type": "string"}], "additionalItems": False}},
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
        },
        {
            "type": "object",
            "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}], "items": False}},
            "dependentRequired": {"a": ["b"]},
            "dependentSchemas": {"c": {"required": ["d"]}},
        },
    ),
    "capitalised type names, empty parameters": (
        {"type": "object", "properties": {"a": {"type": "String"}, "b": {"type": "Integer"}}},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
    ),
}


@pytest.mark.parametrize("case", list(DIALECTS))
def test_dialects_are_normalised_at_registration_and_the_rewrites_are_said(case: str) -> None:
    written, expected = DIALECTS[case]
    made = Tool.from_schema("t", "", written, lambda **kw: kw)
    assert made.definition.parameters_json_schema == expected
    assert made.schema_notes  # each rewrite is named, with its place in the schema
    assert all(note.startswith("/") for note in made.schema_notes)


def test_an_empty_or_missing_schema_is_an_object_without_parameters() -> None:
    assert Tool.from_schema("t", "", {}, lambda: 1).definition.parameters_json_schema == {"type": "object"}
    assert Tool.from_schema("t", "", None, lambda: 1).definition.parameters_json_schema == {"type": "object"}


REFUSED: dict[str, tuple[Any, str]] = {
    "unknown type name": ({"type": "object", "properties": {"a": {"type": "strng"}}}, "/properties/a/type"),
    "type of the wrong kind": ({"type": "object", "properties": {"a": {"type": 3}}}, "/properties/a/type"),
    "malformed keyword": ({"type": "object", "properties": {"a": {"minimum": "ten"}}}, "/properties/a/minimum"),
    "properties not an object": ({"type": "object", "properties": ["a"]}, "/properties"),
    "a subschema that is no schema": ({"type": "object", "properties": {"a": 5}}, "/properties/a"),
    "not a schema at all": (["a"], "/"),
    "parameters that are not an object": ({"type": "string"}, "/type"),
    "bad regex": (
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}},
        "/properties/a/pattern",
    ),
    "back-reference": ({"type": "object", "properties": {"a": {"pattern": r"(a)\1"}}}, "/properties/a/pattern"),
    "pattern property": ({"type": "object", "patternProperties": {"(?=x)": {}}}, "/patternProperties/(?=x)"),
    "remote reference": (
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        "/properties/a/$ref",
    ),
    "nesting bomb": (
        {"type": "object", "properties": {"a": json.loads('{"items":' * 80 + "{}" + "}" * 80)}},
        "/properties/a" + "/items" * 64,
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_unusable_schemas_are_refused_at_registration_with_a_code_and_the_path(case: str) -> None:
    schema, path = REFUSED[case]
    with pytest.raises(InvalidToolSchemaError) as caught:
        Tool.from_schema("t", "", schema, lambda **kw: kw)
    assert caught.value.code == "invalid_tool_schema"
    assert caught.value.path.startswith(path) or (path == "/" and caught.value.path in ("", "/"))
    assert "'t'" in caught.value.message
    with pytest.raises(InvalidToolSchemaError):  # a hand-written tool's schema: refused when registered
        ToolRegistry([HandWritten("t", schema if isinstance(schema, Mapping) else {"properties": schema})])


def test_a_hostile_pattern_cannot_stall_validation() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}
    made = Tool.from_schema("t", "", schema, lambda **kw: kw)
    hand = HandWritten("h", {**schema, "patternProperties": {"^(b+)+$": {}}, "additionalProperties": False})
    registry = ToolRegistry([made, hand])
    hostile = "a" * 5_000 + "!"
    started = time.monotonic()
    assert registry.argument_problems("t", {"a": hostile})
    assert registry.argument_problems("h", {"b" * 5_000 + "!": 1})
    result = execute_plan_sync(
        {
            "steps": [
                {"id": "s", "tool": "t", "arguments": {"a": "$ref:src"}},
                {"id": "src", "tool": "h", "arguments": {}},
            ]
        },
        registry,
    )
    assert time.monotonic() - started < 2
    assert result.steps["s"].error is not None


def test_dialect_schemas_of_hand_written_tools_never_raise_a_foreign_exception() -> None:
    dialect = HandWritten(
        "lookup", {"type": "dict", "properties": {"q": {"type": "str"}, "n": {"type": "float", "nullable": True}}}
    )
    plan = {"steps": [{"id": "s", "tool": "lookup", "arguments": {"q": "x", "n": None}}]}
    assert validate_plan(plan, [dialect]).ok
    assert execute_plan_sync(plan, [dialect]).ok
    bad = {"steps": [{"id": "s", "tool": "lookup", "arguments": {"q": 3}}]}
    report = validate_plan(bad, [dialect])
    assert not report.ok
    assert "argument 'q'" in report.errors[0].message


def test_an_agent_with_tool_planning_and_a_dialect_schema_returns() -> None:
    dialect = HandWritten("lookup", {"type": "dict", "properties": {"q": {"type": "str"}}})
    plan = {
        "steps": [
            {"id": "a", "tool": "lookup", "arguments": {"q": 1}},
            {"id": "b", "tool": "lookup", "arguments": {"q": "x"}},
        ]
    }
    model = ScriptedModel([calls(("execute_tool_plan", plan)), calls(("lookup", {"q": "y"})), "done"])
    agent = Agent(model, tools=[dialect], tool_planning=True)
    result = agent.run_sync("go")
    assert result.output == "done"
    assert dialect.calls == [{"q": "y"}]  # the plan was refused whole (a literal of the wrong type)


# -- validation at dispatch -------------------------------------------------------------------------


def _origins() -> list[tuple[str, Any]]:
    schema_made = Tool.from_schema("power", "", POWER, lambda base: base**2)
    return [("from_schema", schema_made), ("hand_written", HandWritten("power", POWER, lambda base: base**2))]


def _texts() -> HandWritten:
    return HandWritten(
        "texts", {"type": "object", "properties": {}}, lambda: {"ten": "ten", "nested": {"base": "eleven"}}
    )


@pytest.mark.parametrize(("origin", "power"), _origins(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_wrong_type_through_a_reference_never_reaches_the_tool(origin: str, power: Any) -> None:
    called: list[Any] = []
    inner = power.function if origin == "hand_written" else None

    def spy(base: Any) -> Any:
        called.append(base)
        return base

    if origin == "hand_written":
        power.function = lambda base: spy(base)
    else:
        power = Tool.from_schema("power", "", POWER, spy)
    plan = {
        "steps": [
            {"id": "t", "tool": "texts", "arguments": {}},
            {"id": "p1", "tool": "power", "arguments": {"base": "$ref:t.ten"}},
            {"id": "p2", "tool": "power", "arguments": {"base": "{{t.nested.base}}"}},
        ]
    }
    result = execute_plan_sync(plan, [power, _texts()])
    for sid in ("p1", "p2"):
        step = result.steps[sid]
        assert step.status == "failed"
        assert step.error is not None and step.error.kind == "invalid_arguments", step.error
        assert "argument 'base'" in step.error.message and "(schema: properties/base/type)" in step.error.message
    assert "'ten'" in result.steps["p1"].error.message  # type: ignore[union-attr]  # what arrived
    assert called == []
    del inner


@pytest.mark.parametrize(("origin", "power"), _origins(), ids=lambda x: x if isinstance(x, str) else "")
def test_the_agents_direct_and_parallel_calls_are_checked(origin: str, power: Any) -> None:
    model = ScriptedModel([calls(("power", {"base": "ten"}), ("power", {}), ("power", {"base": 3})), "done"])
    agent = Agent(model, tools=[power])
    result = agent.run_sync("go")
    assert result.output == "done"
    replies = [m for m in result.all_messages() if isinstance(m, ToolReturnMessage)]
    assert [r.is_error for r in replies] == [True, True, False]
    assert "argument 'base'" in str(replies[0].content)
    assert "'base' is a required property" in str(replies[1].content)
    if origin == "hand_written":
        assert power.calls == [{"base": 3}]


async def test_a_streamed_plan_checks_resolved_arguments() -> None:
    power = HandWritten("power", POWER, lambda base: base**2)
    plan = json.dumps(
        {
            "steps": [
                {"id": "t", "tool": "texts", "arguments": {}},
                {"id": "p", "tool": "power", "arguments": {"base": "$ref:t.ten"}},
            ]
        }
    )

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(plan), 7):
            yield plan[i : i + 7]

    result = await execute_plan_stream(pieces(), [power, _texts()])
    assert result.steps["p"].error is not None and result.steps["p"].error.kind == "invalid_arguments"
    assert power.calls == []


async def test_code_mode_call_tool_is_checked() -> None:
    power = HandWritten("power", POWER, lambda base: base**2)
    code = """
try:
    call_tool("power", {"base": "ten"})
    set_result("called")
except Exception as exc:
    set_result(str(exc))
"""
    tool_ = CodeTool(SubprocessRunner(), ToolRegistry([power]))
    result, _plan = await tool_.run_code({"code": code}, invoker=ToolInvoker(tool_.registry))
    assert "argument 'base'" in str(result.result) or "argument 'base'" in str(result), result
    assert power.calls == []


def test_calls_of_a_schema_tool_are_validated_once() -> None:
    # FunctionTool and SchemaTool check their own calls: the dispatcher adds no second check.
    made = Tool.from_schema("power", "", POWER, lambda base: base)
    registry = ToolRegistry([made, tool(name="echo")(lambda x: x)])
    assert registry.dispatch_check("power") is None
    assert registry.dispatch_check("echo") is None
    assert ToolRegistry([HandWritten("h", POWER)]).dispatch_check("h") is not None


def test_arguments_too_deep_to_check_are_refused_not_raised() -> None:
    recursive = HandWritten(
        "deep",
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        },
    )
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    problems = ToolRegistry([recursive]).argument_problems("deep", {"a": deep})
    assert problems and "nest too deeply" in problems[0]


# -- owned results ----------------------------------------------------------------------------------


class Backend:
    """A stateful service: ``listing`` returns its own list, ``add`` changes it."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = [{"name": "a"}]

    def definitions(self) -> Sequence[ToolDefinition]:
        return [
            ToolDefinition(name="listing", parameters_json_schema={"type": "object", "properties": {}}),
            ToolDefinition(
                name="add",
                parameters_json_schema={"type": "object", "properties": {"name": {"type": "string"}}},
            ),
            ToolDefinition(
                name="count",
                parameters_json_schema={"type": "object", "properties": {"items": {"type": "array"}}},
            ),
        ]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        if name == "listing":
            return ToolResult(self.items)
        if name == "add":
            self.items.append({"name": arguments["name"]})
            self.items[0]["name"] = "changed"
            return ToolResult(len(self.items))
        return ToolResult(len(arguments["items"]))


async def test_a_later_mutation_changes_neither_the_record_nor_what_dependents_got() -> None:
    backend = Backend()
    plan = {
        "steps": [
            {"id": "before", "tool": "listing", "arguments": {}},
            {"id": "add", "tool": "add", "arguments": {"name": "b"}, "depends_on": ["before"]},
            {"id": "count", "tool": "count", "arguments": {"items": "$ref:before"}, "depends_on": ["add"]},
        ]
    }
    result = await execute_plan(plan, [backend])
    assert result.ok, result.errors
    assert result.steps["before"].output == [{"name": "a"}]
    assert result.steps["count"].output == 1
    assert backend.items == [{"name": "changed"}, {"name": "b"}]


def test_owned_copies_keep_cycles_and_any_depth() -> None:
    from toolplan.tools._result import owned

    cyclic: dict[str, Any] = {"a": [1, 2]}
    cyclic["self"] = cyclic
    copied = owned(cyclic)
    assert copied is not cyclic and copied["self"] is copied and copied["a"] == [1, 2]
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    assert owned(deep) is not deep


# -- coercion: lax by default, strict per tool ------------------------------------------------------


def test_tool_coerces_like_pydantic_by_default_and_refuses_with_strict() -> None:
    @tool
    def lax(n: int, day: datetime.date) -> str:
        return f"{n + 1} {day.isoformat()}"

    @tool(strict=True)
    def exact(n: int, day: datetime.date) -> str:
        return f"{n + 1} {day.isoformat()}"

    plan = {
        "steps": [
            {"id": "lax", "tool": "lax", "arguments": {"n": "5", "day": "2025-01-02"}},
            {"id": "exact_ok", "tool": "exact", "arguments": {"n": 5, "day": "2025-01-02"}},
            {"id": "exact_bad", "tool": "exact", "arguments": {"n": "$ref:lax", "day": "2025-01-02"}},
        ]
    }
    registry = ToolRegistry([lax, exact])
    assert not validate_plan(
        {"steps": [{"id": "s", "tool": "exact", "arguments": {"n": "5", "day": "2025-01-02"}}]}, registry
    ).ok
    result = execute_plan_sync(plan, registry)
    assert result.steps["lax"].output == "6 2025-01-02"
    assert result.steps["exact_ok"].output == "6 2025-01-02"
    bad = result.steps["exact_bad"]
    assert bad.error is not None and bad.error.kind == "invalid_arguments"


def test_strict_schema_tools_refuse_arguments_the_schema_does_not_name() -> None:
    loose = Tool.from_schema("loose", "", POWER, lambda **kw: kw)
    exact = Tool.from_schema("exact", "", POWER, lambda **kw: kw, strict=True)
    registry = ToolRegistry([loose, exact])
    assert registry.argument_problems("loose", {"base": 1, "extra": 2}) == []
    assert registry.argument_problems("exact", {"base": 1, "extra": 2})


async def test_calls_through_a_backend_are_checked_before_they_are_sent() -> None:
    from toolplan.execute import InProcessBackend

    sent: list[str] = []

    class Remote(InProcessBackend):  # stands for Ray: what reaches it runs on a worker
        async def invoke(self, tool: Any, name: str, arguments: Mapping[str, Any], call: Any) -> ToolResult:
            sent.append(name)
            return await super().invoke(tool, name, arguments, call)

    power = HandWritten("power", POWER, lambda base: base**2)
    plan = {
        "steps": [
            {"id": "t", "tool": "texts", "arguments": {}},
            {"id": "p", "tool": "power", "arguments": {"base": "$ref:t.ten"}},
            {"id": "q", "tool": "power", "arguments": {"base": 3}},
        ]
    }
    result = await execute_plan(plan, [power, _texts()], backend=Remote())
    assert result.steps["p"].error is not None and result.steps["p"].error.kind == "invalid_arguments"
    assert result.steps["q"].output == 9
    assert sorted(sent) == ["power", "texts"]


def test_schema_and_function_tools_return_data_they_do_not_keep() -> None:
    kept: list[dict[str, Any]] = [{"name": "a"}]

    def listing() -> list[dict[str, Any]]:
        return kept

    def add(name: str) -> int:
        kept.append({"name": name})
        kept[0]["name"] = "changed"
        return len(kept)

    tools: list[Any] = [
        Tool.from_schema("listing", "", {}, listing),
        Tool.from_schema("add", "", {"type": "object", "properties": {"name": {"type": "string"}}}, add),
        tool(name="listing_fn")(listing),
    ]
    plan = {
        "steps": [
            {"id": "a", "tool": "listing", "arguments": {}},
            {"id": "b", "tool": "listing_fn", "arguments": {}},
            {"id": "c", "tool": "add", "arguments": {"name": "x"}, "depends_on": ["a", "b"]},
        ]
    }
    result = execute_plan_sync(plan, tools)
    assert result.steps["a"].output == [{"name": "a"}] == result.steps["b"].output
    assert kept == [{"name": "changed"}, {"name": "x"}]


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.sampled_from(["", "a", "red", "abc"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "n", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)
_PLAIN_SCHEMAS = [
    {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": ["string", "null"]}},
        "required": ["a"],
    },
    {
        "type": "object",
        "properties": {"n": {"type": "number", "exclusiveMaximum": 2}, "c": {"enum": ["red", None]}},
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
            "b": {"type": "string", "minLength": 1, "maxLength": 2},
        },
    },
    {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}, "c": {}},
    },
]


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(_PLAIN_SCHEMAS) - 1), value=_JSON)
def test_the_quick_check_never_accepts_what_jsonschema_refuses(index: int, value: Any) -> None:
    import jsonschema

    from toolplan.tools._schema_fast import fast_check

    schema = _PLAIN_SCHEMAS[index]
    quick = fast_check(schema)
    assert quick is not None
    if quick(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)
