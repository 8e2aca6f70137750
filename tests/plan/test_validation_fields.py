"""Validation of a step's fields: steps with a duplicate id, the id format, numeric fields."""

from __future__ import annotations

from typing import Any

import pytest

from toolplan import Budget, Plan, PlanValidationError, Step, tool
from toolplan.execute import execute_plan_sync
from toolplan.plan import compile_plan, validate_plan

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


def errors(plan: Any) -> list[tuple[str, str | None, str]]:
    return [(e.code, e.step, e.message) for e in validate_plan(plan, TOOLS).errors]


# 1. Problems inside steps whose id is used more than once


def test_problems_inside_steps_with_a_duplicate_id_are_reported_with_their_position() -> None:
    calls.clear()
    plan = {
        "steps": [
            {"id": "ok", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "A"}},
            {"id": "dup", "tool": "get_wether", "arguments": {"location": "B"}},
            {"id": "dup", "tool": "compare", "arguments": {"a": "$ref:ghost", "b": 1}},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "C", "days": "many"}},
        ]
    }
    found = errors(plan)
    assert [(code, step) for code, step, _ in found] == [
        ("duplicate_id", "dup"),
        ("duplicate_id", "dup"),
        ("duplicate_id", "dup"),
        ("unknown_tool", "dup"),
        ("unknown_reference", "dup"),
        ("invalid_arguments", "dup"),
    ]
    messages = [m for _, _, m in found]
    assert messages[0] == "Step #3 uses id 'dup', which step #2 already uses. Give every step an id of its own."
    where = "(id 'dup' is used by steps #2, #3, #4 and #5)"
    assert messages[3].startswith(f"Step #3 {where}: The step calls unknown tool 'get_wether'.")
    assert messages[4].startswith(f"Step #4 {where}: '$ref:ghost' refers to step 'ghost'")
    assert messages[5].startswith(f"Step #5 {where}: Arguments for tool 'get_weather' are invalid")
    with pytest.raises(PlanValidationError) as info:
        execute_plan_sync(plan, TOOLS)
    assert {i.code for i in info.value.issues} == {
        "duplicate_id",
        "unknown_tool",
        "unknown_reference",
        "invalid_arguments",
    }
    assert calls == []


def test_the_first_step_with_a_duplicate_id_is_named_by_position_too() -> None:
    plan = {
        "steps": [
            {"id": "dup", "tool": "nope", "arguments": {}},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "A"}},
        ]
    }
    found = errors(plan)
    assert [(code, step) for code, step, _ in found] == [("duplicate_id", "dup"), ("unknown_tool", "dup")]
    assert found[1][2].startswith("Step #1 (id 'dup' is used by steps #1 and #2): The step calls unknown tool 'nope'.")


def test_field_problems_of_steps_with_a_duplicate_id_name_their_position() -> None:
    plan = {
        "steps": [
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "A"}, "timeout": 1},
            {"id": "dup", "tool": "get_weather", "arguments": {"location": "B"}, "timeout": -1},
        ]
    }
    found = errors(plan)
    assert [(code, step) for code, step, _ in found] == [("invalid_field", "dup"), ("duplicate_id", "dup")]
    assert found[0][2].startswith("Step #2 (id 'dup' is used by steps #1 and #2): 'timeout' must be")


# 2. Ids must match [A-Za-z0-9_-]+ in full


@pytest.mark.parametrize("bad", ["a\n", "a\r\n", "\na", "a b", "a\t"])
def test_an_id_with_a_line_break_or_space_is_rejected(bad: str) -> None:
    found = errors({"steps": [{"id": bad, "tool": "get_weather", "arguments": {"location": "x"}}]})
    assert [(code, step) for code, step, _ in found] == [("invalid_id", bad)]


def test_an_id_with_a_trailing_newline_is_rejected_in_a_plan_object() -> None:
    plan = Plan(steps=(Step(id="a\n", tool="get_weather", arguments={"location": "x"}),))
    assert [(code, step) for code, step, _ in errors(plan)] == [("invalid_id", "a\n")]


# 3. Numbers: NaN, Infinity, negative and meaningless zero

NAN, INF = float("nan"), float("inf")


def _step(**fields: Any) -> dict[str, Any]:
    return {"id": "a", "tool": "get_weather", "arguments": {"location": "x"}, **fields}


@pytest.mark.parametrize(
    ("fields", "name", "allowed"),
    [
        ({"timeout": NAN}, "'timeout'", "greater than 0"),
        ({"timeout": INF}, "'timeout'", "greater than 0"),
        ({"timeout": -INF}, "'timeout'", "greater than 0"),
        ({"timeout": 0}, "'timeout'", "greater than 0"),
        ({"timeout": -1.5}, "'timeout'", "greater than 0"),
        ({"timeout": 10**400}, "'timeout'", "greater than 0"),
        ({"timeout": True}, "'timeout'", "greater than 0"),
        ({"retry": NAN}, "'retry'", "from 0 to 10"),
        ({"retry": -1}, "'retry'", "from 0 to 10"),
        ({"retry": 11}, "'retry'", "from 0 to 10"),
        ({"retry": 10**5000}, "'retry'", "from 0 to 10"),
        ({"retry": 1.5}, "'retry'", "from 0 to 10"),
        ({"retry": True}, "'retry'", "from 0 to 10"),
    ],
)
def test_bad_step_numbers_are_rejected_naming_the_field_and_the_range(
    fields: dict[str, Any], name: str, allowed: str
) -> None:
    found = errors({"steps": [_step(**fields)]})
    assert [(code, step) for code, step, _ in found] == [("invalid_field", "a")]
    assert name in found[0][2] and allowed in found[0][2]
    assert len(found[0][2]) < 300  # a huge value is not printed in full


@pytest.mark.parametrize(
    ("plan_fields", "name", "allowed"),
    [
        ({"budget": {"max_cost": NAN}}, "'budget.max_cost'", "greater than 0"),
        ({"budget": {"max_cost": INF}}, "'budget.max_cost'", "greater than 0"),
        ({"budget": {"max_cost": -1}}, "'budget.max_cost'", "greater than 0"),
        ({"budget": {"max_cost": 10**400}}, "'budget.max_cost'", "greater than 0"),
        ({"budget": {"max_latency": NAN}}, "'budget.max_latency'", "greater than 0"),
        ({"budget": {"max_latency": INF}}, "'budget.max_latency'", "greater than 0"),
        ({"budget": {"max_latency": 0}}, "'budget.max_latency'", "greater than 0"),
        ({"budget": {"max_tool_calls": NAN}}, "'budget.max_tool_calls'", "0 or more"),
        ({"budget": {"max_tool_calls": -1}}, "'budget.max_tool_calls'", "0 or more"),
        ({"budget": {"max_tool_calls": True}}, "'budget.max_tool_calls'", "0 or more"),
        (
            {"budget": {"max_tool_calls_per_tool": {"get_weather": NAN}}},
            "'budget.max_tool_calls_per_tool'",
            "0 or more",
        ),
        ({"budget": {"max_tool_calls_per_tool": {"get_weather": -1}}}, "'budget.max_tool_calls_per_tool'", "0 or more"),
        (
            {"budget": {"max_tool_calls_per_tool": {"get_weather": True}}},
            "'budget.max_tool_calls_per_tool'",
            "0 or more",
        ),
        ({"budget": {"max_tool_calls_per_tool": [1]}}, "'budget.max_tool_calls_per_tool'", "0 or more"),
        ({"max_concurrency": NAN}, "'max_concurrency'", "1 or more"),
        ({"max_concurrency": INF}, "'max_concurrency'", "1 or more"),
        ({"max_concurrency": 0}, "'max_concurrency'", "1 or more"),
        ({"max_concurrency": True}, "'max_concurrency'", "1 or more"),
    ],
)
def test_bad_plan_numbers_are_rejected_naming_the_field_and_the_range(
    plan_fields: dict[str, Any], name: str, allowed: str
) -> None:
    found = errors({"steps": [_step()], **plan_fields})
    assert [(code, step) for code, step, _ in found] == [("invalid_field", None)]
    assert name in found[0][2] and allowed in found[0][2]


def test_good_numbers_are_accepted() -> None:
    plan = {
        "steps": [_step(timeout=0.5, retry=0), {**_step(timeout=3, retry=10), "id": "b"}],
        "budget": {"max_cost": 2.5, "max_latency": 60, "max_tool_calls": 0, "max_tool_calls_per_tool": {"x": 0}},
        "max_concurrency": 1,
    }
    assert errors(plan) == []


def test_a_nan_timeout_stops_the_plan_before_any_call() -> None:
    # Before: every call of the step timed out at once.
    calls.clear()
    with pytest.raises(PlanValidationError) as info:
        execute_plan_sync({"steps": [_step(timeout=NAN)]}, TOOLS)
    assert [(i.code, i.step) for i in info.value.issues] == [("invalid_field", "a")]
    assert calls == []


def test_a_nan_cost_budget_stops_the_plan_before_any_call() -> None:
    # Before: a NaN max_cost switched the cost budget off.
    calls.clear()
    with pytest.raises(PlanValidationError):
        execute_plan_sync({"steps": [_step()], "budget": {"max_cost": NAN}}, TOOLS)
    assert calls == []


@pytest.mark.parametrize(
    "text",
    [
        '{"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "x"}, "timeout": NaN}]}',
        '{"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "x"}, "retry": Infinity}]}',
        '{"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "x"}}], "budget": {"max_cost": NaN}}',
        '{"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "x"}}], "max_concurrency": -Infinity}',
    ],
)
def test_nan_and_infinity_in_json_text_are_rejected(text: str) -> None:
    # Python's json module reads NaN and Infinity; whether the loader or the field check rejects
    # them, the plan is invalid with a coded issue and runs nothing.
    calls.clear()
    report = validate_plan(text, TOOLS)
    assert not report.ok
    assert {e.code for e in report.errors} <= {"invalid_field", "invalid_json"}
    with pytest.raises(PlanValidationError):
        execute_plan_sync(text, TOOLS)
    assert calls == []


def test_bad_numbers_in_a_plan_object_are_rejected() -> None:
    plan = Plan(
        steps=(
            Step(id="a", tool="get_weather", arguments={"location": "x"}, timeout=NAN),
            Step(id="b", tool="get_weather", arguments={"location": "y"}, retry=-1),
        ),
        budget=Budget(max_cost=NAN, max_latency=INF, max_tool_calls=-1, max_tool_calls_per_tool={"x": -2}),
        max_concurrency=0,
    )
    found = errors(plan)
    assert sorted((code, step or "") for code, step, _ in found) == [
        ("invalid_field", ""),
        ("invalid_field", ""),
        ("invalid_field", ""),
        ("invalid_field", ""),
        ("invalid_field", ""),
        ("invalid_field", "a"),
        ("invalid_field", "b"),
    ]
    text = " ".join(m for _, _, m in found)
    for name in ("'timeout'", "'retry'", "max_cost", "max_latency", "'budget.max_tool_calls'", "max_concurrency"):
        assert name in text


def test_a_valid_plan_object_still_compiles() -> None:
    plan = Plan(
        steps=(Step(id="a", tool="get_weather", arguments={"location": "x"}, timeout=1.0, retry=2),),
        budget=Budget(max_cost=1.0, max_tool_calls=3),
        max_concurrency=2,
    )
    assert compile_plan(plan, TOOLS).plan is plan
