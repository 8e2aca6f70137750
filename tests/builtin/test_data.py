"""DataTools: JMESPath queries, transforms and CSV <-> JSON, in plans and on hostile input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import ToolError, execute_plan, tool
from toolplan.builtin import DataTools

ROWS = [
    {"name": "ada", "age": 36, "team": "core"},
    {"name": "bob", "age": 25, "team": "web"},
    {"name": "cy", "age": 41, "team": "core"},
]


def ops(*items: dict[str, Any]) -> Any:
    """Operations as plain dicts, as a caller from Python (or a model) writes them."""
    return list(items)


@pytest.fixture
def data() -> DataTools:
    return DataTools()


def test_json_query(data: DataTools) -> None:
    assert data.json_query({"rows": ROWS}, "rows[?age > `30`].name") == ["ada", "cy"]
    assert data.json_query(ROWS, "max_by(@, &age).name") == "cy"
    assert data.json_query(json.dumps({"a": {"b": [1, 2]}}), "a.b[-1]") == 2  # JSON text is parsed
    assert data.json_query("plain text", "@") == "plain text"  # other strings are left alone
    assert data.json_query({"a": 1}, "missing") is None


def test_json_transform(data: DataTools) -> None:
    steps: list[Any] = [
        {"op": "filter", "where": "team == 'core'"},
        {"op": "sort", "by": "age", "descending": True},
        {"op": "rename", "fields": {"name": "who"}},
        {"op": "pick", "fields": ["who", "age"]},
    ]
    assert data.json_transform(ROWS, steps) == [{"who": "cy", "age": 41}, {"who": "ada", "age": 36}]
    grouped = data.json_transform(ROWS, ops({"op": "group", "by": "team"}, {"op": "query", "expression": "keys(@)"}))
    assert grouped == ["core", "web"]
    assert data.json_transform(ROWS, ops({"op": "unique", "by": "team"}, {"op": "omit", "fields": ["age"]})) == [
        {"name": "ada", "team": "core"},
        {"name": "bob", "team": "web"},
    ]
    assert data.json_transform([[1, 2], [3], 4], ops({"op": "flatten"}, {"op": "limit", "count": 2, "offset": 1})) == [
        2,
        3,
    ]


def test_csv_round_trip(data: DataTools) -> None:
    text = 'name,age,note\nada,36,"likes, commas"\nbob,025,\n'
    rows = data.csv_to_json(text, infer_types=True)
    assert rows == [{"name": "ada", "age": 36, "note": "likes, commas"}, {"name": "bob", "age": "025", "note": None}]
    assert data.csv_to_json(text)[1] == {"name": "bob", "age": "025", "note": ""}
    assert data.csv_to_json("a;b\n1;2", delimiter=";", header=False) == [["a", "b"], ["1", "2"]]
    csv_text = data.json_to_csv([{"a": 1, "b": {"c": [1]}}, {"a": None, "d": "x,y", "b": True}])
    assert csv_text == 'a,b,d\n1,"{""c"":[1]}",\n,true,"x,y"\n'
    assert data.json_to_csv([[1, 2], [3, 4]], columns=["x", "y"]) == "x,y\n1,2\n3,4\n"
    assert data.csv_to_json(data.json_to_csv(ROWS), infer_types=True) == ROWS


def test_annotations() -> None:
    for definition in DataTools().definitions():
        a = definition.annotations
        assert a.read_only and a.idempotent and not a.destructive and a.cost == 0, definition.name


async def test_a_plan_reshapes_without_the_model() -> None:
    @tool(read_only=True)
    def list_people() -> str:
        """All people, as JSON text (as many APIs return them)."""
        return json.dumps({"people": ROWS})

    plan = {
        "steps": [
            {"id": "people", "tool": "list_people", "arguments": {}},
            {"id": "seniors", "tool": "json_query",
             "arguments": {"data": "$ref:people", "expression": "people[?age > `30`]"}},
            {"id": "csv", "tool": "json_to_csv", "arguments": {"rows": "$ref:seniors", "columns": ["name", "age"]}},
        ],
        "output_steps": ["csv"],
    }  # fmt: skip
    result = await execute_plan(plan, [list_people, DataTools()])
    assert result.outputs == {"csv": "name,age\nada,36\ncy,41\n"}


# -- hostile input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("expression", ["rows[?", "foo(bar)", "[" * 5000, "a." * 1500 + "b", "`not json`"])
def test_bad_expressions_are_business_errors(data: DataTools, expression: str) -> None:
    with pytest.raises(ToolError):
        data.json_query({"rows": []}, expression)


def test_expression_functions_on_wrong_types(data: DataTools) -> None:
    with pytest.raises(ToolError, match="failed"):
        data.json_query({"a": "text"}, "sum(a)")


def test_deeply_nested_json_text_is_not_parsed(data: DataTools) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert data.json_query(deep, "length(@)") == len(deep)  # left as a string, not a RecursionError


def test_transform_errors(data: DataTools) -> None:
    with pytest.raises(ToolError, match="needs a list, got an object"):
        data.json_transform({"a": 1}, ops({"op": "sort"}))
    with pytest.raises(ToolError, match="different types"):
        data.json_transform([1, "a", 2], ops({"op": "sort"}))
    with pytest.raises(ToolError, match="Invalid operations"):
        data.json_transform([], ops({"op": "drop_database"}))
    with pytest.raises(ToolError, match="object or a list of objects"):
        data.json_transform([1, 2], ops({"op": "pick", "fields": ["a"]}))


async def test_invalid_operations_are_caught_before_the_plan_runs() -> None:
    plan = {"steps": [{"id": "t", "tool": "json_transform", "arguments": {"data": [], "operations": [{"op": "nope"}]}}]}
    with pytest.raises(Exception, match="operations"):
        await execute_plan(plan, [DataTools()])


def test_csv_limits_and_garbage() -> None:
    data = DataTools(max_rows=10, max_text_chars=10_000)
    with pytest.raises(ToolError, match="more than 10 rows"):
        data.csv_to_json("a\n" + "1\n" * 11)
    with pytest.raises(ToolError, match="limit is 10000"):
        data.csv_to_json("x" * 10_001)
    with pytest.raises(ToolError, match="cannot be parsed"):
        data.csv_to_json('a,b\n"unclosed,1\n')
    with pytest.raises(ToolError, match="cannot be parsed"):  # one field beyond the csv module's limit
        DataTools().csv_to_json('"' + "x" * 200_000 + '"')
    with pytest.raises(ToolError, match="3 fields but the header has 2"):
        data.csv_to_json("a,b\n1,2,3\n")
    with pytest.raises(ToolError, match="one character"):
        data.csv_to_json("a", delimiter="::")
    with pytest.raises(ToolError, match="longer than 10000"):
        data.json_to_csv([{"a": "y" * 6000}, {"a": "y" * 6000}])
    with pytest.raises(ToolError, match="all objects or all lists"):
        data.json_to_csv([{"a": 1}, [1]])


def test_infer_types_keeps_what_is_not_plainly_a_number(data: DataTools) -> None:
    rows = data.csv_to_json("v\n1_000\n 5\n007\nNaN\n1e999\n12345678901234567890\n-0.5\nTrue\n", infer_types=True)
    assert [r["v"] for r in rows] == ["1_000", " 5", "007", "NaN", "1e999", "12345678901234567890", -0.5, True]
