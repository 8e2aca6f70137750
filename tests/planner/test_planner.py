"""The planner core (issue 16): a question in, a validated plan out, with exactly one repair round."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from toolplan import ModelPrice, PlanValidationError, SpendLimits, UsageLimitExceeded, UserError, execute_plan, tool
from toolplan.models import AssistantMessage, ForceTool, ToolCall, ToolReturnMessage, UserMessage
from toolplan.planner import SUBMIT_TOOL_NAME, Planner, new_id, plan_schema
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolRegistry


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather of a city."""
    return {"city": city, "temp": {"Oslo": 3.0, "Rome": 18.0}.get(city, 10.0)}


@tool
def compare(x: float, y: float) -> str:
    """Compare two numbers."""
    return "first is warmer" if x > y else "second is warmer"


TOOLS = [get_weather, compare]
GOOD = {
    "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "b", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "c", "tool": "compare", "arguments": {"x": "$ref:a.temp", "y": "$ref:b.temp"}},
    ],
    "output_steps": ["c"],
}
BAD = {"steps": [{"id": "a", "tool": "get_wether", "arguments": {"town": "Oslo"}}]}


def submit(plan: Any, call_id: str = "p1") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=SUBMIT_TOOL_NAME, arguments=json.dumps(plan)),))


async def test_a_valid_plan_takes_one_request_and_runs() -> None:
    model = ScriptedModel([submit(GOOD)])
    draft = await Planner(model, TOOLS).plan("Is Oslo warmer than Rome?")
    model.assert_consumed()
    assert draft.valid and not draft.repaired and draft.parent_id is None
    assert draft.usage.requests == 1 and len(draft.requests) == 1
    assert re.fullmatch(r"req_\d{13}_[0-9a-z]{8}", draft.request_id)
    assert re.fullmatch(r"plan_\d{13}_[0-9a-z]{8}", draft.plan_id)
    request = model.requests[0]
    assert [t.name for t in request.tools] == [SUBMIT_TOOL_NAME]
    assert request.settings is not None and request.settings.tool_choice == ForceTool(SUBMIT_TOOL_NAME)
    assert "get_weather(city)" in str(request.messages[0].content)
    assert draft.plan is not None
    result = await execute_plan(draft.plan, TOOLS)
    assert result.outputs == {"c": "second is warmer"}


async def test_an_invalid_plan_gets_exactly_one_repair_with_its_coded_issues() -> None:
    model = ScriptedModel([submit(BAD), submit(GOOD, "p2")])
    draft = await Planner(model, TOOLS).plan("Is Oslo warmer than Rome?")
    model.assert_consumed()
    assert draft.valid and draft.repaired and draft.usage.requests == 2
    assert draft.parent_id is not None and draft.parent_id != draft.plan_id
    second = model.requests[1].messages
    assert second[-2] == submit(BAD)  # the model's own plan goes back
    back = second[-1]
    assert isinstance(back, ToolReturnMessage) and back.is_error and back.tool_call_id == "p1"
    assert "[unknown_tool]" in back.content and "get_wether" in back.content


async def test_a_repair_that_is_still_invalid_stays_invalid_with_its_issues() -> None:
    model = ScriptedModel([submit(BAD), submit(BAD, "p2"), "never asked"])
    draft = await Planner(model, TOOLS).plan("Is Oslo warmer than Rome?")
    assert not draft.valid and draft.repaired and draft.usage.requests == 2  # never a third request
    assert {i.code for i in draft.errors} >= {"unknown_tool"}


async def test_a_plan_written_as_text_is_read_and_repaired_by_message() -> None:
    model = ScriptedModel(["I could not decide.", f"Here it is:\n```json\n{json.dumps(GOOD)}\n```"])
    draft = await Planner(model, TOOLS, constrained=False).plan("Is Oslo warmer than Rome?")
    assert draft.valid and draft.repaired
    assert not model.requests[0].tools
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage) and "[no_plan]" in retry.content


async def test_bad_questions_and_catalogues_are_user_errors() -> None:
    with pytest.raises(UserError, match="non-empty question"):
        await Planner(ScriptedModel([]), TOOLS).plan("  ")
    with pytest.raises(UserError, match="at least one tool"):
        Planner(ScriptedModel([]), [])


def test_the_schema_admits_the_catalogues_plans_only() -> None:
    schema = plan_schema(ToolRegistry.of(TOOLS))
    jsonschema.validate(GOOD, schema)  # references stand where values go
    wrong: dict[str, Any]
    for wrong in (
        BAD,
        {"steps": [{"id": "a", "tool": "compare", "arguments": {"x": 1}}]},  # y is required
        {"steps": [{"id": "a", "tool": "get_weather", "arguments": {"city": 3}}]},  # not a string
        {"steps": []},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


CONDITIONAL = {
    "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "b", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {
            "id": "c",
            "tool": "compare",
            "arguments": {"x": {"$op": "*", "args": ["$ref:a.temp", 10]}, "y": "$ref:b.temp"},
            "when": {"$op": "<", "args": ["$ref:a.temp", "$ref:b.temp"]},
        },
        {"id": "d", "tool": "compare", "arguments": {"x": 1, "y": 2}, "when": "$ref:a.missing_flag"},
    ],
    "output_steps": ["c"],
}


async def test_the_planner_may_write_conditions_and_computed_arguments() -> None:
    schema = plan_schema(ToolRegistry.of(TOOLS))
    jsonschema.validate(CONDITIONAL, schema)
    with pytest.raises(jsonschema.ValidationError):  # an expression is an operator and its operands
        jsonschema.validate(
            {"steps": [{"id": "a", "tool": "compare", "arguments": {"x": {"op": "+"}, "y": 1}}]}, schema
        )
    model = ScriptedModel([submit(CONDITIONAL)])
    planner = Planner(model, TOOLS)
    assert '"when"' in planner.instructions and '"$op"' in planner.instructions
    draft = await planner.plan("Is Oslo ten times warmer than Rome, if it is colder?")
    assert draft.valid and draft.plan is not None and not draft.repaired
    result = await execute_plan(draft.plan, TOOLS)
    assert result.outputs == {"c": "first is warmer"}  # 30.0 > 18.0
    assert result.steps["d"].status == "skipped"


async def test_a_badly_typed_condition_gets_the_repair_round() -> None:
    wrong = {
        "steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "c", "tool": "compare", "arguments": {"x": 1, "y": 2}, "when": {"$op": ">", "args": ["$ref:zz", 0]}},
        ]
    }
    model = ScriptedModel([submit(wrong), submit(GOOD, "p2")])
    draft = await Planner(model, TOOLS).plan("Is Oslo warmer than Rome?")
    assert draft.valid and draft.repaired
    back = model.requests[1].messages[-1]
    assert isinstance(back, ToolReturnMessage) and "zz" in back.content


def test_ids_are_unique_and_sortable() -> None:
    ids = [new_id("exec") for _ in range(200)]
    assert len(set(ids)) == 200 and all(i.startswith("exec_") for i in ids)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return request.getfixturevalue("postgres_url")


async def test_both_versions_of_a_repaired_plan_are_stored_under_the_request(store_url: str) -> None:
    from toolplan import PlanNotFoundError
    from toolplan.planner import get_request
    from toolplan.store import open_store

    model = ScriptedModel([submit(BAD), submit(GOOD, "p2")])
    async with open_store(store_url) as store:
        draft = await Planner(model, TOOLS, store=store).plan("Is Oslo warmer than Rome?")
        kept = await get_request(store, draft.request_id)
        plan = await store.get_plan(draft.plan_id)
        first_plan = await store.get_plan(kept.versions[0].plan_id)  # kept as written: invalid for these tools
        with pytest.raises(PlanNotFoundError) as missing:
            await store.get_plan("plan_nope")
        result = await execute_plan(plan, TOOLS, store=store)
    assert kept.query == "Is Oslo warmer than Rome?" and kept.plan_id == draft.plan_id
    first, repair = kept.versions
    assert repair.parent_id == first.plan_id == draft.parent_id
    assert not first.valid and "unknown_tool" in {i.code for i in first.issues} and "get_wether" in first.text
    assert repair.valid and repair.plan == draft.plan
    assert result.outputs == {"c": "second is warmer"}
    assert first_plan.steps[0].tool == "get_wether"
    assert missing.value.code == "plan_not_found" and missing.value.plan_id == "plan_nope"


async def test_an_unreadable_draft_is_kept_as_text(tmp_path: Any) -> None:
    from toolplan import PlanNotFoundError
    from toolplan.planner import get_request
    from toolplan.store import open_store

    model = ScriptedModel(["no plan here", "still none"])
    async with open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        draft = await Planner(model, TOOLS, constrained=False, store=store).plan("Plan something")
        kept = await get_request(store, draft.request_id)
        with pytest.raises(PlanNotFoundError, match="could not be read as a plan"):
            await store.get_plan(draft.plan_id)
    assert not draft.valid and draft.plan is None and [v.text for v in kept.versions] == ["", ""]
    assert all(v.issues[0].code == "no_plan" for v in kept.versions)


async def test_hostile_model_output_ends_in_an_invalid_draft_not_an_exception() -> None:
    deep = "x" + '{"a":' + "[" * 100_000
    braces = "{" * 200_000
    model = ScriptedModel([deep, braces])
    draft = await Planner(model, TOOLS, constrained=False).plan("Plan something")
    assert not draft.valid and draft.repaired and [i.code for i in draft.errors] == ["no_plan"]
    nested = AssistantMessage(
        tool_calls=(ToolCall(id="p1", name=SUBMIT_TOOL_NAME, arguments='{"steps": ' + "[" * 5_000 + "]" * 5_000 + "}"),)
    )
    draft = await Planner(ScriptedModel([nested, nested]), TOOLS).plan("Plan something")
    assert not draft.valid and draft.errors  # a coded issue from validation, nothing raised


@tool
def note(text: str) -> str:
    """Write a note."""
    return text


async def test_a_chaining_planner_delivers_the_valid_plan_in_the_chaining_dialect() -> None:
    model = ScriptedModel([submit(GOOD)])
    draft = await Planner(model, TOOLS, dialect="chaining").plan("Is Oslo warmer than Rome?")
    assert draft.valid and draft.dialect == "chaining" and draft.plan is not None
    assert draft.document == {
        "tools": [
            {"name": "get_weather", "parameters": {"city": "Oslo"}},
            {"name": "get_weather", "parameters": {"city": "Rome"}},
            {
                "name": "compare",
                "parameters": {"x": "{{get_weather.temp}}", "y": "{{get_weather_2.temp}}"},
                "dependsOn": ["get_weather", "get_weather_2"],
            },
        ],
        "executionOrder": ["get_weather", "get_weather", "compare"],
        "output_steps": ["compare"],
        "failure_mode": "fail_forward",
        "parallel": True,  # the plan's steps run as a native plan's do, not one at a time
    }
    assert draft.as_dialect("chaining") == draft.document and draft.as_dialect("native") == GOOD
    result = await execute_plan(draft.document, TOOLS)
    assert result.outputs == {"compare": "second is warmer"}
    native = await Planner(ScriptedModel([submit(GOOD)]), TOOLS).plan("Is Oslo warmer than Rome?")
    assert native.dialect == "native" and native.document == GOOD


async def test_a_valid_plan_the_chaining_dialect_cannot_say_is_repaired() -> None:
    # Valid natively: '{{get_weather.city}}' names no step, so it is text. In chaining the first
    # get_weather step is named 'get_weather' and the text would insert its output: not a plan to deliver.
    clash = {
        "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "n", "tool": "note", "arguments": {"text": "Keep {{get_weather.city}} as text"}},
        ]
    }
    fixed = {
        "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "n", "tool": "note", "arguments": {"text": "Weather in {{w.city}}"}},
        ]
    }
    model = ScriptedModel([submit(clash), submit(fixed, "p2")])
    draft = await Planner(model, [get_weather, note], dialect="chaining").plan("Note Oslo's weather")
    first, _ = draft.versions
    assert not first.valid and [i.code for i in first.issues if i.severity == "error"] == ["not_expressible"]
    back = model.requests[1].messages[-1]
    assert isinstance(back, ToolReturnMessage) and "[not_expressible] step 'n':" in back.content
    assert draft.valid and draft.repaired and draft.document is not None
    assert draft.document["tools"][1]["parameters"] == {"text": "Weather in {{get_weather.city}}"}
    # The same plan is fine for a native planner, which delivers it as written.
    native = await Planner(ScriptedModel([submit(clash)]), [get_weather, note]).plan("Note Oslo's weather")
    assert native.valid and not native.repaired and native.document == clash


async def test_an_invalid_draft_has_no_document_and_as_dialect_says_why() -> None:
    draft = await Planner(ScriptedModel([submit(BAD), submit(BAD, "p2")]), TOOLS, dialect="chaining").plan("?")
    assert not draft.valid and draft.document is None
    with pytest.raises(PlanValidationError) as invalid:
        draft.as_dialect("native")
    assert "unknown_tool" in {i.code for i in invalid.value.issues}
    with pytest.raises(UserError, match="'native' or 'chaining' dialect, not 'batch'"):
        Planner(ScriptedModel([]), TOOLS, dialect="batch")  # type: ignore[arg-type]


async def test_the_store_s_old_request_methods_and_names_still_work_with_a_deprecation_warning(tmp_path: Any) -> None:
    import toolplan.store
    from toolplan.planner import PlanVersion, RequestInfo
    from toolplan.store import open_store

    with pytest.warns(DeprecationWarning, match="use toolplan.planner.PlanVersion"):
        assert toolplan.store.PlanVersion is PlanVersion
    with pytest.warns(DeprecationWarning, match="use toolplan.planner.RequestInfo"):
        assert toolplan.store.RequestInfo is RequestInfo
    version = PlanVersion(plan_id="plan_1", parent_id=None, plan=None, text="", issues=(), valid=False)
    async with open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        with pytest.warns(DeprecationWarning, match="Store.save_request is deprecated"):
            await store.save_request("req_1", "a question", [version])
        with pytest.warns(DeprecationWarning, match="Store.get_request is deprecated"):
            kept = await store.get_request("req_1")
    assert kept.query == "a question" and kept.versions == (version,)


async def test_a_spend_cap_refuses_the_repair_request_and_says_what_was_spent() -> None:
    model = ScriptedModel([submit(BAD), submit(GOOD, "p2")])
    spend = SpendLimits(max_output_tokens=1, prices={"scripted": ModelPrice(input=1.0, output=1.0)})
    with pytest.raises(UsageLimitExceeded) as info:
        await Planner(model, TOOLS, spend=spend).plan("Is Oslo warmer than Rome?")
    assert len(model.requests) == 1  # the answer passed max_output_tokens: the repair is never asked for
    assert info.value.limit == "max_output_tokens" and info.value.usage.requests == 1
    assert info.value.money == pytest.approx(info.value.usage.total_tokens / 1e6)


async def test_a_planner_reports_its_money_at_its_prices() -> None:
    model = ScriptedModel([submit(GOOD)])
    spend = SpendLimits(prices={"scripted": ModelPrice(input=2.0, output=4.0)})
    draft = await Planner(model, TOOLS, spend=spend).plan("Is Oslo warmer than Rome?")
    assert draft.money == pytest.approx((draft.usage.input_tokens * 2.0 + draft.usage.output_tokens * 4.0) / 1e6)
    assert (await Planner(ScriptedModel([submit(GOOD)]), TOOLS).plan("Is Oslo warmer?")).money is None
    with pytest.raises(UserError, match="no price for model 'scripted'"):
        Planner(model, TOOLS, spend=SpendLimits(max_money=1.0))
