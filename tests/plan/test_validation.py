from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import PlanValidationError, tool
from toolplan.execute import execute_plan_sync
from toolplan.plan import parse_plan, validate_plan

calls: list[str] = []


@tool
def get_weather(location: str, days: int = 1) -> dict[str, Any]:
    """Weather for a city."""
    calls.append(location)
    return {"temp": 20}


@tool
def compare(a: Any, b: Any) -> str:
    """Compare two things."""
    calls.append("compare")
    return "same"


TOOLS = [get_weather, compare]


def codes(plan: Any, **kw: Any) -> list[tuple[str, str | None]]:
    report = validate_plan(plan, TOOLS, **kw)
    return [(e.code, e.step) for e in report.errors]


def test_every_problem_is_reported_at_once_and_no_tool_runs() -> None:
    calls.clear()
    plan = {
        "steps": [
            {"id": "ok", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "A"}},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "B"}},
            {"id": "blank", "tool": "", "arguments": {}},
            {"id": "typo", "tool": "get_wether", "arguments": {"location": "X"}},
            {"id": "meta", "tool": "execute_tool_plan", "arguments": {}},
            {"id": "badref", "tool": "compare", "arguments": {"a": "$ref:nowhere", "b": 1}},
            {"id": "selfref", "tool": "compare", "arguments": {"a": "$ref:selfref.x", "b": 1}},
            {"id": "c1", "tool": "compare", "arguments": {"a": "$ref:c2", "b": 1}},
            {"id": "c2", "tool": "compare", "arguments": {"a": "$ref:c3", "b": 1}},
            {"id": "c3", "tool": "compare", "arguments": {"a": "$ref:c1", "b": 1}},
            {"id": "badjson", "tool": "get_weather", "arguments": "{location: Oslo"},
            {"id": "schema", "tool": "get_weather", "arguments": {"location": "Oslo", "days": "many"}},
            {"id": "missing", "tool": "get_weather", "arguments": {}},
            {"id": "extra", "tool": "get_weather", "arguments": {"location": "Oslo", "unit": "C"}},
            {"id": "bad id!", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "dep", "tool": "get_weather", "arguments": {"location": "Oslo"}, "depends_on": ["ghost"]},
        ],
        "output_steps": ["ok", "phantom"],
    }
    with pytest.raises(PlanValidationError) as info:
        execute_plan_sync(plan, TOOLS)
    found = {(i.code, i.step) for i in info.value.issues}
    assert found == {
        ("duplicate_id", "dup"),
        ("missing_tool", "blank"),
        ("unknown_tool", "typo"),
        ("meta_tool", "meta"),
        ("unknown_reference", "badref"),
        ("self_reference", "selfref"),
        ("cycle", "c1"),
        ("invalid_arguments_json", "badjson"),
        ("invalid_arguments", "schema"),
        ("invalid_arguments", "missing"),
        ("invalid_arguments", "extra"),
        ("invalid_id", "bad id!"),
        ("unknown_dependency", "dep"),
        ("unknown_output_step", "phantom"),
    }
    assert calls == []
    message = str(info.value)
    assert "no tool was called" in message
    assert "Did you mean 'get_weather'?" in message
    assert "c1 -> c2 -> c3 -> c1" in message


def test_empty_plan() -> None:
    assert codes({"steps": []}) == [("empty_plan", None)]


def test_too_many_steps() -> None:
    steps = [{"id": f"s{i}", "tool": "get_weather", "arguments": {"location": "x"}} for i in range(51)]
    assert codes({"steps": steps}) == [("too_many_steps", None)]
    assert codes({"steps": steps}, max_steps=60) == []


def test_not_json_and_not_a_plan() -> None:
    assert codes("{steps: ]") == [("invalid_json", None)]
    assert codes("[1, 2]") == [("invalid_plan", None)]
    assert codes({"nope": 1}) == [("invalid_plan", None)]


def test_invalid_fields() -> None:
    plan = {
        "steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "x"}, "timeout": -1, "retry": "x"}],
        "max_concurrency": 0,
        "failure_mode": "yolo",
    }
    assert sorted(codes(plan), key=str) == [
        ("invalid_field", "a"),
        ("invalid_field", "a"),
        ("invalid_field", None),
        ("invalid_field", None),
    ]


def test_referenced_arguments_are_not_schema_checked_until_run_time() -> None:
    plan = {
        "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "x"}},
            {"id": "w2", "tool": "get_weather", "arguments": {"location": "$ref:w.city", "days": "{{w.temp}}"}},
        ]
    }
    assert codes(plan) == []


def test_arguments_given_as_json_string() -> None:
    plan = parse_plan({"steps": [{"id": "a", "tool": "get_weather", "arguments": json.dumps({"location": "Oslo"})}]})
    assert plan.steps[0].arguments == {"location": "Oslo"}


def test_issue_dicts_for_the_model() -> None:
    report = validate_plan({"steps": [{"id": "a", "tool": "nope"}]}, TOOLS)
    assert report.to_dict()["errors"] == [
        {
            "code": "unknown_tool",
            "step": "a",
            "message": "The step calls unknown tool 'nope'. Known tools: get_weather, compare.",
        }
    ]


def test_declared_plan_is_not_executable() -> None:
    assert codes({"plannedSequence": [{"toolName": "x"}]}) == [("declared_plan", None)]


def test_a_broken_reference_is_reported_once() -> None:
    plan = {"steps": [{"id": "c", "tool": "compare", "arguments": {"a": {}, "b": "$ref:berlin"}}]}
    assert codes(plan) == [("unknown_reference", "c")]


def test_literal_arguments_next_to_references_are_still_checked() -> None:
    plan = {
        "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "x"}},
            {"id": "a", "tool": "get_weather", "arguments": {"location": "$ref:w.city", "days": "many"}},
            {"id": "b", "tool": "get_weather", "arguments": {"location": "$ref:w.city", "unit": "C"}},
            {"id": "c", "tool": "compare", "arguments": {"b": "$ref:w"}},
        ]
    }
    report = validate_plan(plan, TOOLS)
    assert [(e.step, e.message.split(": ", 1)[1]) for e in report.errors] == [
        ("a", "argument 'days': Input should be a valid integer, unable to parse string as an integer (got 'many')."),
        ("b", "unexpected argument 'unit'."),
        ("c", "missing required argument 'a'."),
    ]


def test_steps_whose_arguments_are_all_references_are_each_checked() -> None:
    """Such steps of one tool are checked once per plan: each still gets its own issue."""
    plan = {
        "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "x"}},
            {"id": "c1", "tool": "compare", "arguments": {"b": "$ref:w"}},
            {"id": "ok", "tool": "compare", "arguments": {"a": "$ref:w", "b": "$ref:c1"}},
            {"id": "c2", "tool": "compare", "arguments": {"b": "$ref:c1"}},
            {"id": "c3", "tool": "compare", "arguments": {"a": "{{w.temp}}"}},
        ]
    }
    report = validate_plan(plan, TOOLS)
    assert [(e.step, e.message.split(": ", 1)[1]) for e in report.errors] == [
        ("c1", "missing required argument 'a'."),
        ("c2", "missing required argument 'a'."),
        ("c3", "missing required argument 'b'."),
    ]
