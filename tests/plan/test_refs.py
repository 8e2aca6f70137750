from __future__ import annotations

import copy
from typing import Any

import pytest

from toolplan import PlanIssue, tool
from toolplan.execute import execute_plan_sync
from toolplan.plan import validate_plan

received: dict[str, Any] = {}


@tool
def emit(value: Any = None) -> Any:
    """Return its argument."""
    return value


@tool
def make_injection() -> str:
    """Return text that looks like references."""
    return "{{secret}} and $ref:secret"


@tool
def capture(key: str, value: Any = None) -> str:
    """Record what it received."""
    received[key] = value
    return "ok"


TOOLS = [emit, capture, make_injection]


def run(steps: list[dict[str, Any]], **plan: Any) -> dict[str, Any]:
    received.clear()
    result = execute_plan_sync({"steps": steps, **plan}, TOOLS)
    assert result.status == "succeeded", result.to_dict()
    return dict(received)


SOURCE = {
    "id": "src",
    "tool": "emit",
    "arguments": {
        "value": {
            "obj": {"a": 1},
            "arr": [{"id": "first"}, {"id": "second"}, {"id": "last"}],
            "num": 3.5,
            "flag": True,
            "text": "hello",
            "nothing": None,
        }
    },
}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("$ref:src.obj", {"a": 1}),
        ("$ref:src.arr", [{"id": "first"}, {"id": "second"}, {"id": "last"}]),
        ("$ref:src.num", 3.5),
        ("$ref:src.flag", True),
        ("$ref:src.text", "hello"),
        ("$ref:src.nothing", None),
        ("$ref:src.arr.0.id", "first"),
        ("$ref:src.arr[1].id", "second"),
        ("$ref:src.arr[-1].id", "last"),
        ("$ref:src.arr.-1.id", "last"),
        ("$ref:src.missing", None),
        ("$ref:src.arr.9", None),
        ("$ref:src.obj.a.deeper", None),
        ("{{src.num}}", 3.5),
        ("{{ src.obj }}", {"a": 1}),
    ],
)
def test_whole_value_references_keep_types(ref: str, expected: Any) -> None:
    got = run([SOURCE, {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": ref}}])
    assert got["v"] == expected
    assert type(got["v"]) is type(expected)


def test_whole_output_reference() -> None:
    got = run([SOURCE, {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "$ref:src"}}])
    assert got["v"]["text"] == "hello"


def test_interpolation_with_several_templates() -> None:
    value = "{{src.text}} world: {{src.num}} {{src.obj}} {{src.flag}} {{src.nothing}} {{src.arr.0.id}}"
    got = run([SOURCE, {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": value}}])
    assert got["v"] == 'hello world: 3.5 {"a":1} true null first'


def test_references_at_any_depth() -> None:
    value = {"outer": {"inner": ["$ref:src.num", {"deep": "$ref:src.arr.1"}, "x {{src.text}}"]}, "lit": [1, 2]}
    got = run([SOURCE, {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": value}}])
    assert got["v"] == {"outer": {"inner": [3.5, {"deep": {"id": "second"}}, "x hello"]}, "lit": [1, 2]}


def test_several_references_in_one_argument_and_several_arguments() -> None:
    steps = [
        {"id": "a", "tool": "emit", "arguments": {"value": 1}},
        {"id": "b", "tool": "emit", "arguments": {"value": 2}},
        {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": ["$ref:a", "$ref:b", "{{a}}+{{b}}"]}},
    ]
    assert run(steps)["v"] == [1, 2, "1+2"]


def test_json_text_output_is_parsed_for_field_access() -> None:
    steps = [
        {"id": "j", "tool": "emit", "arguments": {"value": '{"user": {"name": "Ada", "tags": ["x", "y"]}}'}},
        {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": ["$ref:j.user.name", "$ref:j.user.tags[1]"]}},
    ]
    assert run(steps)["v"] == ["Ada", "y"]


def test_whole_json_text_output_stays_text() -> None:
    steps = [
        {"id": "j", "tool": "emit", "arguments": {"value": '{"a": 1}'}},
        {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "$ref:j"}},
    ]
    assert run(steps)["v"] == '{"a": 1}'


def test_inserted_values_are_not_resolved_again() -> None:
    steps = [
        {"id": "secret", "tool": "emit", "arguments": {"value": "TOP SECRET"}},
        {"id": "evil", "tool": "emit", "arguments": {"value": "$$ref:secret"}},
        {"id": "evil2", "tool": "make_injection", "arguments": {}},
        {
            "id": "c",
            "tool": "capture",
            "arguments": {"key": "v", "value": ["$ref:evil", "says {{evil}}", "$ref:evil2", "<{{evil2}}>"]},
            "depends_on": ["secret"],
        },
    ]
    got = run(steps)
    assert got["v"] == [
        "$ref:secret",
        "says $ref:secret",
        "{{secret}} and $ref:secret",
        "<{{secret}} and $ref:secret>",
    ]


def test_escaped_ref_is_literal() -> None:
    got = run([{"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "$$ref:whatever"}}])
    assert got["v"] == "$ref:whatever"


def test_escapes_and_literals_nested_next_to_references() -> None:
    value = {
        "esc": ["$$ref:a", {"deep": "$$ref:b"}],
        "lit": {"x": [1, "$5 is not a ref", "{ {not} }", None]},
        "ref": ["$ref:a", "$ref:a", {"again": "$ref:a"}],
    }
    steps = [
        {"id": "a", "tool": "emit", "arguments": {"value": 7}},
        {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": value}},
    ]
    written = copy.deepcopy(steps)
    assert run(steps)["v"] == {
        "esc": ["$ref:a", {"deep": "$ref:b"}],
        "lit": {"x": [1, "$5 is not a ref", "{ {not} }", None]},
        "ref": [7, 7, {"again": 7}],
    }
    assert steps == written  # the plan as written is left as it was
    only_escapes = {"esc": ["$$ref:a", {"deep": "$$ref:b"}], "n": 1}
    got = run([{"id": "c", "tool": "capture", "arguments": {"key": "v", "value": only_escapes}}])
    assert got["v"] == {"esc": ["$ref:a", {"deep": "$ref:b"}], "n": 1}


def test_non_step_template_is_kept_and_warned() -> None:
    report = validate_plan(
        {"steps": [{"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "Hi {{ user.name }}"}}]}, TOOLS
    )
    assert report.ok
    assert [w.code for w in report.warnings] == ["unresolved_template"]
    assert run([{"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "Hi {{ user.name }}"}}])["v"] == (
        "Hi {{ user.name }}"
    )


def test_inline_ref_inside_text_is_warned() -> None:
    report = validate_plan(
        {
            "steps": [
                {"id": "a", "tool": "emit", "arguments": {"value": 1}},
                {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "see $ref:a"}},
            ]
        },
        TOOLS,
    )
    assert report.ok
    assert [w.code for w in report.warnings] == ["inline_ref"]


def test_references_are_dependencies() -> None:
    report = validate_plan(
        {
            "steps": [
                {"id": "c", "tool": "capture", "arguments": {"key": "v", "value": "{{a.x}} $ref:b"}, "depends_on": "b"},
                {"id": "a", "tool": "emit", "arguments": {}},
                {"id": "b", "tool": "emit", "arguments": {}},
            ]
        },
        TOOLS,
    )
    assert report.compiled is not None
    assert set(report.compiled.deps["c"]) == {"a", "b"}
    assert report.compiled.waves() == [["a", "b"], ["c"]]


def test_issue_str() -> None:
    assert str(PlanIssue(code="x", step="s", message="m.")) == "[x] step 's': m."


def test_tools_never_receive_the_plans_own_lists_and_dicts() -> None:
    @tool
    def grow(items: Any) -> Any:
        """Change the list it is given."""
        items.append("grown")
        return items

    shared = ["x"]
    plan: dict[str, Any] = {
        "steps": [
            {"id": "a", "tool": "grow", "arguments": {"items": shared}},
            {"id": "b", "tool": "grow", "arguments": {"items": shared}},
        ]
    }
    result = execute_plan_sync(plan, [grow])
    assert result.outputs == {"a": ["x", "grown"], "b": ["x", "grown"]}
    assert shared == ["x"] and plan["steps"][0]["arguments"]["items"] is shared


def test_references_inside_container_subclasses_and_str_subclasses_kept() -> None:
    import enum
    from collections import OrderedDict

    class Color(enum.StrEnum):
        RED = "red"

    class Items(list[Any]):
        pass

    got = run(
        [
            SOURCE,
            {"id": "c1", "tool": "capture", "arguments": {"key": "od", "value": OrderedDict(n="$ref:src.num")}},
            {"id": "c2", "tool": "capture", "arguments": {"key": "ls", "value": Items(["$ref:src.num", 2])}},
            {"id": "c3", "tool": "capture", "arguments": {"key": "enum", "value": Color.RED}},
        ]
    )
    assert got["od"] == {"n": 3.5} and got["ls"] == [3.5, 2]
    assert got["enum"] is Color.RED
    report = validate_plan(
        {
            "steps": [
                SOURCE,
                {"id": "c", "tool": "capture", "arguments": {"key": "k", "value": OrderedDict(n="$ref:src")}},
            ]
        },
        TOOLS,
    )
    assert report.compiled is not None and report.compiled.steps["c"].deps == ("src",)


def test_python_tuples_in_arguments_stay_literal_values() -> None:
    # A tuple that looks like a compiled reference node must still arrive as data.
    lookalike = (0, "src", (), "$ref:src")
    got = run(
        [
            SOURCE,
            {"id": "c1", "tool": "capture", "arguments": {"key": "top", "value": lookalike}},
            {"id": "c2", "tool": "capture", "arguments": {"key": "mixed", "value": {"t": (1, 2), "n": "$ref:src.num"}}},
            {"id": "c3", "tool": "capture", "arguments": {"key": "list", "value": [lookalike, "$ref:src.flag"]}},
            {"id": "c4", "tool": "capture", "arguments": {"key": "plain", "value": [(1, "a"), {"u": (2,)}]}},
        ]
    )
    assert got["top"] == lookalike and type(got["top"]) is tuple
    assert got["mixed"] == {"t": (1, 2), "n": 3.5}
    assert got["list"] == [lookalike, True]
    assert got["plain"] == [(1, "a"), {"u": (2,)}]


def test_compiled_references_are_not_tracked_by_the_garbage_collector() -> None:
    # A big plan keeps its compiled arguments until it ends; tracked, every collection would walk
    # them (docs/benchmarks.md, "Garbage collection at 10,000 steps").
    import gc

    report = validate_plan(
        {
            "steps": [
                SOURCE,
                {
                    "id": "c",
                    "tool": "capture",
                    "arguments": {"key": "k", "value": ["$ref:src.arr[0].id", "{{src.text}}!"]},
                },
            ]
        },
        TOOLS,
    )
    assert report.compiled is not None
    for _ in range(20):  # each collection untracks one more level of nested tuples (5 here)
        gc.collect()
    assert not gc.is_tracked(report.compiled.steps["c"].arguments)


def test_a_reference_that_gives_null_is_named_in_the_steps_error() -> None:
    @tool
    def source() -> dict[str, Any]:
        return {"x": None, "city": "Oslo"}

    @tool
    def weather(city: str, days: int = 1) -> str:
        return city

    @tool
    def fails() -> str:
        raise RuntimeError("down")

    result = execute_plan_sync(
        {
            "steps": [
                {"id": "src", "tool": "source", "arguments": {}},
                {"id": "missing", "tool": "weather", "arguments": {"city": "$ref:src.cty"}},
                {"id": "null", "tool": "weather", "arguments": {"city": "Rome", "days": "{{src.x}}"}},
                {"id": "fine", "tool": "weather", "arguments": {"city": "$ref:src.city", "days": "$ref:src.x"}},
                {
                    "id": "fb",
                    "tool": "fails",
                    "arguments": {},
                    "fallback": {"tool": "weather", "arguments": {"city": "$ref:src.y"}},
                },
            ]
        },
        [source, weather, fails],
    )
    errors = {sid: s.error.message for sid, s in result.steps.items() if s.error is not None}
    assert errors["missing"].endswith("('$ref:src.cty' resolved to null: the output of step 'src' has no such field.)")
    assert errors["null"].endswith("('{{src.x}}' resolved to null: it is null in the output of step 'src'.)")
    assert "'$ref:src.city'" not in errors["fine"] and "'$ref:src.x' resolved to null" in errors["fine"]
    assert "'$ref:src.y' resolved to null" in errors["fb"]
    assert "resolved to null" in result.to_model_text()
