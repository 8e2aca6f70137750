"""Conditions (``when``) and computed arguments: what validation accepts and refuses, before anything runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolplan import PlanValidationError, tool
from toolplan.execute import execute_plan
from toolplan.plan import validate_plan

CALLED: list[str] = []


@tool
def check(item: str) -> dict[str, Any]:
    """Stock of an item."""
    CALLED.append("check")
    return {"item": item, "count": 3, "price": 2.5}


@tool
def buy(item: str, quantity: int = 1) -> str:
    """Buy an item."""
    CALLED.append("buy")
    return f"bought {quantity} {item}"


class Stock(BaseModel):
    count: int
    name: str
    sizes: list[int]


@tool
def stock(item: str) -> Stock:
    """Typed stock of an item."""
    return Stock(count=1, name=item, sizes=[1])


TOOLS = [check, buy, stock]


def plan(when: Any = None, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"id": "buy", "tool": "buy", "arguments": arguments or {"item": "pen"}}
    if when is not None:
        step["when"] = when
    return {"steps": [{"id": "check", "tool": "check", "arguments": {"item": "pen"}}, step]}


def errors(p: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    report = validate_plan(p, TOOLS)
    return [(e.code, e.step, e.message) for e in report.errors]


def expr(op: str, *args: Any) -> dict[str, Any]:
    return {"$op": op, "args": list(args)}


def test_a_condition_and_a_computed_argument_are_valid_and_their_references_become_dependencies() -> None:
    p = {
        "steps": [
            {"id": "check", "tool": "check", "arguments": {"item": "pen"}},
            {"id": "other", "tool": "check", "arguments": {"item": "ink"}},
            {
                "id": "buy",
                "tool": "buy",
                "arguments": {"item": "pen", "quantity": expr("*", "$ref:other.count", 2)},
                "when": expr("all", expr(">", "$ref:check.count", 0), expr("exists", "$ref:check.price")),
            },
        ]
    }
    report = validate_plan(p, TOOLS)
    assert report.ok, report.errors
    assert report.compiled is not None
    assert set(report.compiled.deps["buy"]) == {"check", "other"}


@pytest.mark.parametrize(
    "when",
    ["$ref:check.count", "{{check.count}}", True, False, expr("not", "$ref:check.count")],
)
def test_the_forms_of_a_condition(when: Any) -> None:
    assert errors(plan(when)) == []


@pytest.mark.parametrize(
    ("when", "code", "words"),
    [
        (expr("**", 2, 3), "invalid_expression", "'**' is not an operator"),
        ({"$op": "==", "args": [1, 1], "note": "x"}, "invalid_expression", "exactly"),
        ({"$op": "==", "args": "$ref:check.count"}, "invalid_expression", "without an args list"),
        (expr("==", "$ref:check.count"), "invalid_expression", "takes exactly 2 operands, got 1"),
        (expr("not", 1, 2), "invalid_expression", "takes exactly 1 operand, got 2"),
        (expr("exists", "count"), "invalid_expression", "'exists' takes one reference"),
        (expr("==", "$ref:nowhere.count", 1), "unknown_reference", "'nowhere'"),
        (expr("<", "$ref:check.count", "ten"), "invalid_expression", None),  # only known at run time: fine
        (expr("<", 3, "ten"), "invalid_expression", "cannot compare a number with a string"),
        (expr("==", 3, "3"), "invalid_expression", "never equal"),
        (expr(">", expr("length", "$ref:check.item"), True), "invalid_expression", "not a boolean"),
        (expr("+", "$ref:check.count", "one"), "invalid_expression", "'+' takes numbers, not a string"),
        (expr("length", 5), "invalid_expression", "'length' takes a string, an array or an object"),
        (expr("concat", "a", [1]), "invalid_expression", "'concat' joins strings"),
        ("in stock", "invalid_condition", "'when' must be a reference"),
        ({"op": "==", "args": [1, 1]}, "invalid_condition", "'when' must be"),
        (3, "invalid_condition", "'when' must be"),
        ("$ref:buy.done", "self_reference", "its own output"),
    ],
)
def test_each_rule_has_its_own_error(when: Any, code: str, words: str | None) -> None:
    found = errors(plan(when))
    if words is None:  # a reference's type is not known before the run
        assert found == []
        return
    assert [(c, s) for c, s, _ in found] == [(code, "buy")], found
    assert words in found[0][2]


def test_a_computed_argument_is_checked_like_a_condition() -> None:
    found = errors(plan(arguments={"item": "pen", "quantity": expr("*", "$ref:check.count", "three")}))
    assert [(c, s) for c, s, _ in found] == [("invalid_expression", "buy")]
    found = errors(plan(arguments={"item": "pen", "quantity": expr("*", "$ref:gone.count", 3)}))
    assert [(c, s) for c, s, _ in found] == [("unknown_reference", "buy")]


def test_a_formula_written_as_a_reference_gets_the_expression_form_as_advice() -> None:
    report = validate_plan(plan(arguments={"item": "pen", "quantity": "$ref:check.count * 3"}), TOOLS)
    assert report.ok  # a field may be named "count * 3"
    assert [(w.code, w.step) for w in report.warnings] == [("formula_reference", "buy")]
    assert '{"$op": "*", "args": ["$ref:ID.price", 3]}' in report.warnings[0].message
    found = errors(plan(arguments={"item": "pen", "quantity": "$ref:check.count[0 + 1]"}))
    assert [(c, s) for c, s, _ in found] == [("invalid_reference", "buy")]
    assert '{"$op": "*", "args": ["$ref:ID.price", 3]}' in found[0][2]


def test_size_and_depth_are_bounded() -> None:
    wide = expr("+", *([1] * 64))
    (code, _, message), *_ = errors(plan(arguments={"item": "pen", "quantity": wide}))
    assert code == "invalid_expression" and "at most 64" in message
    deep: Any = "$ref:check.count"
    for _ in range(9):
        deep = expr("-", deep)
    (code, _, message), *_ = errors(plan(arguments={"item": "pen", "quantity": deep}))
    assert code == "invalid_expression" and "8 levels" in message
    ok: Any = "$ref:check.count"
    for _ in range(8):
        ok = expr("-", ok)
    assert errors(plan(arguments={"item": "pen", "quantity": ok})) == []


def test_a_cycle_through_a_condition_is_reported() -> None:
    p = {
        "steps": [
            {"id": "a", "tool": "check", "arguments": {"item": "x"}, "when": "$ref:b.count"},
            {"id": "b", "tool": "check", "arguments": {"item": "$ref:a.item"}},
        ]
    }
    assert "cycle" in [c for c, _, _ in errors(p)]


async def test_an_invalid_condition_runs_zero_tools() -> None:
    CALLED.clear()
    with pytest.raises(PlanValidationError) as info:
        await execute_plan(plan(expr("<", 3, "ten")), TOOLS)
    assert CALLED == []
    assert info.value.issues[0].code == "invalid_expression"


def test_when_survives_to_dict_and_the_chaining_dump() -> None:
    from toolplan.plan import dump_plan, parse_plan

    p = parse_plan(plan(expr(">", "$ref:check.count", 0)))
    assert p.to_dict()["steps"][1]["when"] == expr(">", "$ref:check.count", 0)
    chaining = dump_plan(p, "chaining")
    assert chaining["tools"][1]["when"] == expr(">", "{{check.count}}", 0)
    assert parse_plan(chaining).steps[1].when == expr(">", "{{check.count}}", 0)


@pytest.mark.parametrize(
    ("when", "problem"),
    [
        (expr(">", "$ref:s.count", 0), None),
        (expr(">", "$ref:s.sizes.0", 0), None),
        (expr("==", "$ref:s.unknown", "x"), None),
        (expr("+", "$ref:s.name", 1), "'+' takes numbers, not a string"),
        (expr("==", "$ref:s.count", "3"), "never equal"),
        (expr("<", "$ref:s.sizes.0", "$ref:s.name"), "cannot compare a number with a string"),
        (expr("length", "$ref:s.count"), "'length' takes a string, an array or an object, not a number"),
    ],
)
def test_output_schemas_type_the_references(when: Any, problem: str | None) -> None:
    p = {
        "steps": [
            {"id": "s", "tool": "stock", "arguments": {"item": "pen"}},
            {"id": "buy", "tool": "buy", "arguments": {"item": "pen"}, "when": when},
        ]
    }
    found = errors(p)
    if problem is None:
        assert found == []
    else:
        assert [(c, s) for c, s, _ in found] == [("invalid_expression", "buy")] and problem in found[0][2]
