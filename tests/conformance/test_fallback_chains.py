"""Conformance, fallback chains: a step's fallback may have its own fallback (ACP's ``fallbackOnFailure``).

Each link is validated like a step (tool known, arguments checked, references valid), counted by the
budget (each link is a call), at most `MAX_FALLBACK_DEPTH` deep; the record says which link's result
stands; a field that is ignored anywhere in a step or a fallback is a validation warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolplan import PlanValidationError, ToolError, current_call, execute_plan, parse_plan, tool, validate_plan
from toolplan.plan import MAX_FALLBACK_DEPTH
from toolplan.policy import parse_declaration
from toolplan.store import open_store

CALLS: list[str] = []
KEYS: list[str] = []


@tool(read_only=True)
def primary(query: str) -> str:
    """The main search."""
    CALLS.append("primary")
    KEYS.append(current_call().idempotency_key)
    raise ToolError("primary is down")


@tool(read_only=True)
def mirror(query: str) -> str:
    """A mirror of the main search."""
    CALLS.append("mirror")
    KEYS.append(current_call().idempotency_key)
    raise ToolError("mirror is down too")


@tool(read_only=True)
def archive(query: str) -> str:
    """An old copy."""
    CALLS.append(f"archive:{query}")
    KEYS.append(current_call().idempotency_key)
    return f"archived {query}"


@tool(read_only=True)
def topic() -> str:
    """Today's topic."""
    return "tides"


TOOLS = [primary, mirror, archive, topic]


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()
    KEYS.clear()


def chain(**last: Any) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "t", "tool": "topic", "arguments": {}},
            {
                "id": "s",
                "tool": "primary",
                "arguments": {"query": "$ref:t"},
                "fallback": {
                    "tool": "mirror",
                    "arguments": {"query": "$ref:t"},
                    "fallback": {"tool": "archive", "arguments": {"query": "$ref:t"}, **last},
                },
            },
        ]
    }


async def test_each_link_is_tried_until_one_succeeds_and_the_record_names_it() -> None:
    result = await execute_plan(chain(), TOOLS)
    step = result.steps["s"]
    assert step.status == "succeeded" and step.output == "archived tides"
    assert step.used_fallback and step.fallback_link == 2 and step.attempts == 3
    assert CALLS == ["primary", "mirror", "archive:tides"]
    assert step.to_dict()["fallback_link"] == 2
    run = result.run_id  # each link is another call, with a key of its own
    assert [f"{run}:s", f"{run}:s:fallback", f"{run}:s:fallback2"] == KEYS


async def test_every_link_is_a_call_for_the_budget() -> None:
    plan = {**chain(), "budget": {"max_tool_calls": 3}}  # topic, primary, mirror: archive is refused
    result = await execute_plan(plan, TOOLS)
    step = result.steps["s"]
    assert step.status == "failed" and CALLS == ["primary", "mirror"]
    assert step.error is not None and "mirror is down too" in step.error.message


async def test_the_link_is_kept_by_the_store(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        result = await execute_plan(chain(), TOOLS, store=store)
        stored = await store.get_run(result.run_id)
    assert stored.result.steps["s"].fallback_link == 2 and stored.result.steps["s"].used_fallback


def test_each_link_is_validated_like_a_step() -> None:
    plan = chain()
    link = plan["steps"][1]["fallback"]["fallback"]
    link["tool"] = "nope"
    plan["steps"][1]["fallback"]["arguments"] = {"query": "$ref:missing"}
    codes = sorted(e.code for e in validate_plan(plan, TOOLS).errors)
    assert codes == ["unknown_reference", "unknown_tool"]
    bad_args = chain()
    bad_args["steps"][1]["fallback"]["fallback"]["arguments"] = {"query": 5}
    errors = validate_plan(bad_args, TOOLS).errors
    assert [e.code for e in errors] == ["invalid_arguments"] and "fallback #2" in errors[0].message


def test_the_chain_is_bounded() -> None:
    third = {"tool": "archive", "arguments": {"query": "x"}}
    assert MAX_FALLBACK_DEPTH == 3 and validate_plan(chain(fallback=third), TOOLS).ok  # three links
    plan = chain(fallback={**third, "fallback": third})  # a fourth link
    errors = validate_plan(plan, TOOLS).errors
    assert [e.code for e in errors] == ["fallback_too_deep"]


def test_an_ignored_field_is_a_warning_not_silence() -> None:
    plan = chain(retry=3)
    plan["steps"][1]["fallback"]["timeout"] = 5
    report = validate_plan(plan, TOOLS)
    assert report.ok
    warned = [w.message for w in report.warnings if w.code == "unknown_field"]
    assert len(warned) == 2 and any("'retry'" in w for w in warned) and any("'timeout'" in w for w in warned)


def test_an_ignored_field_of_a_chaining_entry_or_a_batch_step_is_a_warning() -> None:
    chaining = {"tools": [{"name": "archive", "parameters": {"query": "x"}, "fallback": {"tool": "mirror"}}]}
    warned = [(w.code, w.step) for w in validate_plan(chaining, TOOLS).warnings]
    assert warned == [("unknown_field", "archive")]
    batch = {"steps": [{"tool": "archive", "args": {"query": "x"}, "retry": 2}]}
    assert [(w.code, w.step) for w in validate_plan(batch, TOOLS).warnings] == [("unknown_field", "0")]


def test_the_chain_survives_a_round_trip() -> None:
    plan = parse_plan(chain())
    assert parse_plan(plan.to_dict()) == plan
    assert [link.tool for link in plan.steps[1].fallback.chain] == ["mirror", "archive"]  # type: ignore[union-attr]


def test_an_acp_intent_may_have_a_fallback_intent() -> None:
    declared = {
        "plannedSequence": [
            {
                "toolName": "primary",
                "rationale": "search",
                "fallbackOnFailure": {
                    "toolName": "mirror",
                    "rationale": "the mirror",
                    "fallbackOnFailure": {"toolName": "archive", "rationale": "an old copy"},
                },
            }
        ]
    }
    call = parse_declaration(declared).calls[0]
    assert call.fallback == "mirror" and call.fallbacks == ("mirror", "archive")
    too_deep: dict[str, Any] = {"toolName": "archive"}
    for _ in range(MAX_FALLBACK_DEPTH):
        too_deep = {"toolName": "mirror", "fallbackOnFailure": too_deep}
    with pytest.raises(PlanValidationError) as info:
        parse_declaration({"plannedSequence": [{"toolName": "primary", "fallbackOnFailure": too_deep}]})
    assert [i.code for i in info.value.issues] == ["fallback_too_deep"]
