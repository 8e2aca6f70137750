from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import PlanValidationError, tool
from toolplan.execute import execute_plan
from toolplan.plan import parse_plan, validate_plan
from toolplan.plan._parse import detect_dialect


@tool
def search(query: str) -> dict[str, Any]:
    """Search."""
    if query == "fail":
        raise RuntimeError("search backend down")
    return {"top": f"result for {query}", "count": 3}


@tool
def summarize(text: str) -> str:
    """Summarise."""
    return f"summary of {text}"


TOOLS = [search, summarize]


def chaining(**extra: Any) -> dict[str, Any]:
    return {
        "tools": [
            {"name": "search", "parameters": {"query": "python"}},
            {"name": "search", "parameters": {"query": "rust"}},
            {
                "name": "summarize",
                "parameters": {"text": "{{search.top}} / {{search_2.count}}"},
                "dependsOn": ["search"],
            },
        ],
        **extra,
    }


def test_detection() -> None:
    assert detect_dialect(chaining()) == "chaining"
    assert detect_dialect({"steps": [{"tool": "search", "args": {}}]}) == "batch"
    assert detect_dialect({"steps": [{"id": "a", "tool": "search"}]}) == "native"


async def test_chaining_ids_templates_and_dependencies() -> None:
    plan = parse_plan(chaining())
    assert plan.step_ids == ("search", "search_2", "summarize")
    assert plan.failure_mode == "fail_fast"
    result = await execute_plan(plan, TOOLS)
    assert result.outputs["summarize"] == "summary of result for python / 3"


async def test_chaining_unresolvable_template_keeps_text_with_warning() -> None:
    plan = chaining()
    plan["tools"][2]["parameters"] = {"text": "{{search.missing}} and {{unknown.x}}"}
    report = validate_plan(plan, TOOLS)
    assert report.ok and [w.code for w in report.warnings] == ["unresolved_template"]
    result = await execute_plan(plan, TOOLS)
    step = result.steps["summarize"]
    assert step.output == "summary of {{search.missing}} and {{unknown.x}}"
    assert step.warnings and "{{search.missing}}" in step.warnings[0]


async def test_chaining_stops_on_first_failure() -> None:
    plan = {
        "tools": [
            {"name": "search", "parameters": {"query": "fail"}},
            {"name": "summarize", "parameters": {"text": "independent"}, "dependsOn": "search"},
        ]
    }
    result = await execute_plan(plan, TOOLS)
    assert result.steps["search"].status == "failed"
    assert result.steps["summarize"].status == "skipped"


def test_execution_order_is_checked() -> None:
    good = chaining(executionOrder=["search", "search", "summarize"])
    assert validate_plan(good, TOOLS).ok
    wrong = chaining(executionOrder=["summarize", "search", "search"])
    assert [e.code for e in validate_plan(wrong, TOOLS).errors] == ["invalid_execution_order"]
    incomplete = chaining(executionOrder=["search", "summarize"])
    errs = validate_plan(incomplete, TOOLS).errors
    assert [e.code for e in errs] == ["invalid_execution_order"]
    assert "search_2" in errs[0].message


def test_chaining_cycle_is_named() -> None:
    plan = {
        "tools": [
            {"name": "search", "parameters": {"query": "{{summarize}}"}},
            {"name": "summarize", "parameters": {"text": "{{search.top}}"}},
        ]
    }
    parse_plan(plan)  # the structure is fine; the cycle is a validation error
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan, TOOLS).raise_for_errors()
    assert [(i.code, i.step) for i in info.value.issues] == [("cycle", "search")]
    assert "search -> summarize -> search" in info.value.issues[0].message


async def test_batch_runs_in_parallel_and_reports_per_step() -> None:
    plan = {
        "steps": [
            {"tool": "search", "args": {"query": "a"}},
            {"tool": "search", "args": {"query": "fail"}},
            {"tool": "summarize", "args": {"text": "$ref:0"}},
        ]
    }
    result = await execute_plan(plan, TOOLS)
    assert json.loads(result.to_model_text()) == [
        {"step": 0, "tool": "search", "status": "ok", "result": {"top": "result for a", "count": 3}},
        {
            "step": 1,
            "tool": "search",
            "status": "error",
            "error": "Tool 'search' raised RuntimeError: search backend down",
        },
        {"step": 2, "tool": "summarize", "status": "ok", "result": "summary of $ref:0"},
    ]


def test_batch_limit_is_fifty() -> None:
    plan = {"steps": [{"tool": "search", "args": {"query": str(i)}} for i in range(51)]}
    report = validate_plan(plan, TOOLS, max_steps=1000)
    assert [e.code for e in report.errors] == ["too_many_steps"]
