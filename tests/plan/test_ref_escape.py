"""The ``$$ref:`` escape stands for the text ``$ref:`` where it is written, and only there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import tool
from toolplan.execute import execute_plan_sync
from toolplan.plan import compile_plan, validate_plan


@tool
def emit(value: Any = None) -> Any:
    """Return its argument."""
    return value


@tool
def tricky() -> str:
    """Return text that looks like escapes and references."""
    return "$$ref:a {{a}} $ref:a"


TOOLS = [emit, tricky]


def _run_value(value: Any, source: Any = 7) -> tuple[Any, tuple[str, ...]]:
    plan = {
        "steps": [
            {"id": "a", "tool": "emit", "arguments": {"value": source}},
            {"id": "c", "tool": "emit", "arguments": {"value": value}},
        ]
    }
    compiled = compile_plan(plan, TOOLS)
    result = execute_plan_sync(plan, TOOLS)
    assert result.status == "succeeded", result.to_dict()
    return result.steps["c"].output, compiled.steps["c"].deps


@pytest.mark.parametrize(
    ("value", "expected", "deps"),
    [
        ("$$ref:a is {{a}}", "$ref:a is 7", ("a",)),
        ("$$ref:a", "$ref:a", ()),
        ("x $$ref:a {{a}}", "x $ref:a 7", ("a",)),
        ("{{a}} then $$ref:a", "7 then $ref:a", ("a",)),
        ("{{a}}$$ref:a{{a}}", "7$ref:a7", ("a",)),
        ("x $$ref:a", "x $ref:a", ()),
        ("$$ref:a $$ref:b {{a}}", "$ref:a $ref:b 7", ("a",)),
        ("$$$ref:a {{a}}", "$$ref:a 7", ("a",)),
        (["$$ref:a is {{a}}", {"k": "{{a}} $$ref:a"}], ["$ref:a is 7", {"k": "7 $ref:a"}], ("a",)),
    ],
)
def test_the_escape_is_undone_only_where_it_is(value: Any, expected: Any, deps: tuple[str, ...]) -> None:
    assert _run_value(value) == (expected, deps)


def test_an_escape_next_to_an_unresolved_template_keeps_both_as_text() -> None:
    report = validate_plan(
        {"steps": [{"id": "c", "tool": "emit", "arguments": {"value": "$$ref:a {{ user }}"}}]}, TOOLS
    )
    assert report.ok and [w.code for w in report.warnings] == ["unresolved_template"]
    out, _ = _run_value("$$ref:a {{ user }}")
    assert out == "$ref:a {{ user }}"


def test_inserted_values_are_not_unescaped_nor_scanned() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "tricky", "arguments": {}},
            {"id": "c", "tool": "emit", "arguments": {"value": "<{{a}}> $$ref:a"}},
            {"id": "d", "tool": "emit", "arguments": {"value": "$ref:a"}},
            {"id": "e", "tool": "emit", "arguments": {"value": ["$$ref:a {{a}}", "{{a}}"]}},
        ]
    }
    result = execute_plan_sync(plan, TOOLS)
    out = {sid: result.steps[sid].output for sid in ("c", "d", "e")}
    assert out == {
        "c": "<$$ref:a {{a}} $ref:a> $ref:a",
        "d": "$$ref:a {{a}} $ref:a",
        "e": ["$ref:a $$ref:a {{a}} $ref:a", "$$ref:a {{a}} $ref:a"],
    }


def test_an_unescaped_inline_ref_is_warned_also_next_to_a_template() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "emit", "arguments": {"value": 1}},
            {"id": "c", "tool": "emit", "arguments": {"value": "see $ref:a and {{a}}"}},
            {"id": "d", "tool": "emit", "arguments": {"value": "see $$ref:a and {{a}}"}},
        ]
    }
    report = validate_plan(plan, TOOLS)
    assert report.ok
    assert [(w.code, w.step) for w in report.warnings] == [("inline_ref", "c")]


def test_json_text_plan_with_an_escape() -> None:
    text = json.dumps(
        {
            "steps": [
                {"id": "a", "tool": "emit", "arguments": {"value": "x"}},
                {"id": "c", "tool": "emit", "arguments": {"value": "$$ref:a is {{a}}"}},
            ]
        }
    )
    assert execute_plan_sync(text, TOOLS).steps["c"].output == "$ref:a is x"
