"""Conditional steps and computed arguments at run time: skipped with the reason, dependents, hostile values."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolplan import tool
from toolplan.execute import PlanEvent, StepFinished, execute_plan, execute_plan_stream

CALLS: list[str] = []


@tool
def emit(value: Any = None) -> Any:
    """Return the value given."""
    CALLS.append("emit")
    return value


@tool
def record(value: Any = None) -> Any:
    """Record a call and return its value."""
    CALLS.append(f"record:{value}")
    return value


@tool
def fail(value: Any = None) -> Any:
    """Always fail."""
    CALLS.append("fail")
    raise RuntimeError("down")


TOOLS = [emit, record, fail]


def expr(op: str, *args: Any) -> dict[str, Any]:
    return {"$op": op, "args": list(args)}


def source(value: Any) -> dict[str, Any]:
    return {"id": "src", "tool": "emit", "arguments": {"value": value}}


async def run(*steps: dict[str, Any], **options: Any) -> Any:
    CALLS.clear()
    return await execute_plan({"steps": list(steps)}, TOOLS, **options)


async def test_a_false_condition_skips_the_step_with_the_reason_and_the_plan_succeeds() -> None:
    events: list[PlanEvent] = []
    result = await run(
        source({"in_stock": False, "count": 0}),
        {"id": "buy", "tool": "record", "arguments": {"value": "buy"}, "when": "$ref:src.in_stock"},
        {"id": "cmp", "tool": "record", "arguments": {"value": "cmp"}, "when": expr(">", "$ref:src.count", 0)},
        on_event=events.append,
    )
    assert CALLS == ["emit"]
    for sid, shown in (("buy", "$ref:src.in_stock is false"), ("cmp", "$ref:src.count > 0 ($ref:src.count is 0)")):
        step = result.steps[sid]
        assert step.status == "skipped" and step.attempts == 0
        assert step.error is not None and step.error.kind == "condition"
        assert step.error.message.startswith("Condition false: ") and shown in step.error.message
    assert result.status == "succeeded"
    assert {e.result.id for e in events if isinstance(e, StepFinished)} == {"src", "buy", "cmp"}


async def test_a_true_condition_runs_the_step() -> None:
    result = await run(
        source({"in_stock": True, "count": 2}),
        {"id": "buy", "tool": "record", "arguments": {"value": "buy"}, "when": "$ref:src.in_stock"},
        {"id": "many", "tool": "record", "arguments": {"value": "many"}, "when": expr(">=", "$ref:src.count", 2)},
        {"id": "lit", "tool": "record", "arguments": {"value": "lit"}, "when": True},
    )
    assert result.status == "succeeded"
    assert sorted(CALLS) == ["emit", "record:buy", "record:lit", "record:many"]


async def test_dependents_of_a_skipped_step_are_skipped_but_after_steps_run() -> None:
    result = await run(
        source({"ok": False}),
        {"id": "blog", "tool": "record", "arguments": {"value": "blog"}, "when": "$ref:src.ok"},
        {"id": "comment", "tool": "record", "arguments": {"value": "$ref:blog"}},
        {"id": "reply", "tool": "record", "arguments": {"value": "$ref:comment"}},
        {"id": "log", "tool": "record", "arguments": {"value": "log"}, "after": ["blog"]},
    )
    assert CALLS == ["emit", "record:log"]
    assert result.steps["comment"].status == "skipped"
    error = result.steps["comment"].error
    assert error is not None and error.kind == "condition"
    assert error.message == "Skipped because dependency 'blog' was skipped (a condition was false)."
    assert result.steps["reply"].error is not None and result.steps["reply"].error.kind == "condition"
    assert result.steps["log"].status == "succeeded"
    assert result.status == "succeeded"


async def test_presence_truthiness_and_opposite_conditions() -> None:
    result = await run(
        source({"name": "", "items": [], "id": 7, "gone": None}),
        {"id": "has_id", "tool": "record", "arguments": {"value": "id"}, "when": expr("exists", "$ref:src.id")},
        {"id": "has_x", "tool": "record", "arguments": {"value": "x"}, "when": expr("exists", "$ref:src.x")},
        {"id": "null", "tool": "record", "arguments": {"value": "null"}, "when": expr("exists", "$ref:src.gone")},
        {"id": "name", "tool": "record", "arguments": {"value": "name"}, "when": "$ref:src.name"},
        {"id": "empty", "tool": "record", "arguments": {"value": "empty"}, "when": expr("not", "$ref:src.items")},
        {"id": "either", "tool": "record", "arguments": {"value": "any"}, "when": expr("any", "$ref:src.x", 1)},
        {"id": "missing", "tool": "record", "arguments": {"value": "missing"}, "when": "$ref:src.nothing"},
    )
    ran = {sid for sid, s in result.steps.items() if s.status == "succeeded"}
    assert ran == {"src", "has_id", "empty", "either"}
    error = result.steps["missing"].error
    assert error is not None and "$ref:src.nothing is missing" in error.message


async def test_a_failed_dependency_skips_a_conditional_step_as_a_failure() -> None:
    result = await run(
        source(1),
        {"id": "bad", "tool": "record", "arguments": {"value": expr("/", "$ref:src", 0)}},
        {"id": "next", "tool": "record", "arguments": {"value": 1}, "when": "$ref:bad"},
    )
    bad = result.steps["bad"]
    assert bad.status == "failed" and bad.error is not None and bad.error.kind == "invalid_expression"
    assert "divides by zero" in bad.error.message
    assert result.steps["next"].error is not None and result.steps["next"].error.kind == "skipped"
    assert result.status == "failed"


async def test_a_condition_skip_does_not_stop_a_fail_fast_plan() -> None:
    result = await execute_plan(
        {
            "steps": [
                source(0),
                {"id": "a", "tool": "record", "arguments": {"value": "a"}, "when": "$ref:src"},
                {"id": "b", "tool": "record", "arguments": {"value": "b"}, "after": ["a"]},
            ],
            "failure_mode": "fail_fast",
        },
        TOOLS,
    )
    assert [result.steps[s].status for s in ("src", "a", "b")] == ["succeeded", "skipped", "succeeded"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (expr("*", 3, "$ref:src.price"), 7.5),
        (expr("+", "$ref:src.count", 1, 2), 7),
        (expr("-", "$ref:src.count"), -4),
        (expr("-", "$ref:src.count", 10), -6),
        (expr("/", "$ref:src.count", 2), 2),
        (expr("/", "$ref:src.count", 8), 0.5),
        (expr("//", 7, "$ref:src.count"), 1),
        (expr("%", 7, "$ref:src.count"), 3),
        (expr("max", "$ref:src.prices"), 9),
        (expr("min", "$ref:src.count", 3, "$ref:src.price"), 2.5),
        (expr("length", "$ref:src.prices"), 3),
        (expr("length", "$ref:src.name"), 3),
        (expr("concat", "$ref:src.name", "-", "$ref:src.count", "-", True), "pen-4-true"),
        (expr("==", "$ref:src.flag", 1), False),
        (expr("==", "$ref:src.prices", [1, 9, 4.0]), True),
        ({"nested": [expr("+", "$ref:src.count", 1)], "text": "{{src.name}}!"}, {"nested": [5], "text": "pen!"}),
    ],
)
async def test_computed_arguments(value: Any, expected: Any) -> None:
    result = await run(
        source({"price": 2.5, "count": 4, "prices": [1, 9, 4], "name": "pen", "flag": True}),
        {"id": "use", "tool": "record", "arguments": {"value": value}},
    )
    step = result.steps["use"]
    assert step.status == "succeeded", step.error
    assert step.output == expected and type(step.output) is type(expected)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (expr("+", "$ref:src.name", 1), "'+' takes numbers, got string \"pen\""),
        (expr("*", "$ref:src.big", "$ref:src.big"), "at most 100 digits"),
        (expr("+", "$ref:src.huge", 1), "at most 100 digits"),
        (expr("*", "$ref:src.float", "$ref:src.float"), "too large to represent"),
        (expr("%", 1, "$ref:src.zero"), "divides by zero"),
        (expr("concat", "$ref:src.long", "$ref:src.long"), "longer than 100,000 characters"),
        (expr("max", "$ref:src.empty"), "empty array"),
        (expr("<", "$ref:src.name", 1), "compares two numbers or two strings"),
        (expr("length", "$ref:src.missing"), "null (a missing field"),
        (expr("concat", "a", "$ref:src.missing"), "null (a missing field"),
    ],
)
async def test_a_bad_value_fails_the_step_with_a_coded_error_not_the_run(value: Any, words: str) -> None:
    result = await run(
        source(
            {
                "name": "pen",
                "big": 10**60,
                "huge": 10**200,
                "float": 1e200,
                "zero": 0,
                "long": "x" * 60_000,
                "empty": [],
            }
        ),
        {"id": "use", "tool": "record", "arguments": {"value": value}},
        {"id": "cond", "tool": "record", "arguments": {"value": 1}, "when": value},
    )
    assert CALLS == ["emit"]
    for sid, what in (("use", "arguments"), ("cond", "condition ('when')")):
        step = result.steps[sid]
        assert step.status == "failed" and step.error is not None
        assert step.error.kind == "invalid_expression"
        assert step.error.message.startswith(f"The {what} of step {sid!r} could not be computed: ")
        assert words in step.error.message


async def test_a_fallback_gets_computed_arguments_too() -> None:
    result = await run(
        source({"n": 2}),
        {
            "id": "use",
            "tool": "fail",
            "arguments": {},
            "fallback": {"tool": "record", "arguments": {"value": expr("*", "$ref:src.n", 10)}},
        },
        {
            "id": "bad",
            "tool": "fail",
            "arguments": {},
            "fallback": {"tool": "record", "arguments": {"value": expr("/", "$ref:src.n", 0)}},
        },
    )
    assert result.steps["use"].status == "succeeded" and result.steps["use"].output == 20
    bad = result.steps["bad"]
    assert bad.status == "failed" and bad.error is not None and bad.error.kind == "invalid_expression"
    assert sorted(CALLS) == ["emit", "fail", "fail", "record:20"]


async def test_the_chaining_dialect_takes_when_with_templates() -> None:
    result = await run_chaining(
        {
            "tools": [
                {"name": "emit", "parameters": {"value": {"success": True, "id": 5}}},
                {
                    "name": "record",
                    "parameters": {"value": expr("concat", "comment on ", "{{emit.id}}")},
                    "dependsOn": "emit",
                    "when": "{{emit.success}}",
                },
            ],
            "executionOrder": ["emit", "record"],
        }
    )
    assert result.steps["record"].output == "comment on 5"


async def run_chaining(p: dict[str, Any]) -> Any:
    CALLS.clear()
    return await execute_plan(p, TOOLS)


async def test_a_streamed_plan_keeps_its_conditions() -> None:
    text = json.dumps(
        {
            "steps": [
                source({"ok": False}),
                {"id": "no", "tool": "record", "arguments": {"value": "no"}, "when": "$ref:src.ok"},
                {"id": "never", "tool": "record", "arguments": {"value": "never"}, "when": False},
            ]
        }
    )

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(text), 7):
            yield text[i : i + 7]

    CALLS.clear()
    result = await execute_plan_stream(pieces(), TOOLS)
    assert CALLS == ["emit"]
    assert [result.steps[s].status for s in ("src", "no", "never")] == ["succeeded", "skipped", "skipped"]
    assert result.steps["never"].error is not None and result.steps["never"].error.message == (
        "Condition false: 'when' is false."
    )
