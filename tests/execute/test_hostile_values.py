"""Hostile JSON and values at toolplan's edges: plans, arguments, tool outputs and what the model reads.

Nothing here may raise anything but the documented errors: `PlanValidationError` / an issue for
plans, `ToolError` for tool-call arguments, `ReferenceResolutionError` for references, and the
model-facing text is always valid, encodable JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import PlanValidationError, ReferenceResolutionError, ToolError, tool
from toolplan._json import MAX_DEPTH, JSONTextError, dumps, json_safe, loads, too_deep
from toolplan.agent import Agent
from toolplan.agent._executors import tool_content
from toolplan.execute import PlanResult, StepError, StepResult, execute_plan
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.plan import validate_plan
from toolplan.plan._refs import compile_arguments
from toolplan.plan._resolve import resolve
from toolplan.testing import ScriptedModel

DEEP_1000 = "[" * 1000 + "]" * 1000
DEEP_100000 = "[" * 100_000 + "]" * 100_000
BIG_NUMBER = "1" * 5000


def strict_loads(text: str) -> Any:
    """``json.loads`` that also rejects the non-JSON constants NaN and Infinity."""

    def reject(name: str) -> Any:
        raise AssertionError(f"bare {name} in JSON text")

    return json.loads(text, parse_constant=reject)


def nested_dict(depth: int) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for _ in range(depth):
        d = {"a": d}
    return d


def cyclic_list() -> list[Any]:
    a: list[Any] = [1]
    a.append(a)
    return a


called: list[str] = []


@tool
def echo(x: Any = None) -> Any:
    """Return the argument."""
    called.append("echo")
    return x


# --- the parser -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason", "words"),
    [
        (DEEP_1000, "depth", f"nested deeper than {MAX_DEPTH} levels"),
        (DEEP_100000, "depth", f"nested deeper than {MAX_DEPTH} levels"),
        (BIG_NUMBER, "number", "a number with more than 4,300 digits"),
        ('{"a": -' + BIG_NUMBER + "}", "number", "a number with more than 4,300 digits"),
        ("[1, NaN]", "syntax", "expected value at line 1, column 5"),
        ('{"a": 1', "syntax", "line 1"),
        ('"\\ud800"', "syntax", "lone surrogate"),
        ("[1] x", "syntax", "trailing characters"),
    ],
)
def test_loads_raises_one_error_saying_what_and_where(text: str, reason: str, words: str) -> None:
    with pytest.raises(JSONTextError) as info:
        loads(text)
    assert info.value.reason == reason
    assert words in info.value.message
    assert isinstance(info.value, ValueError)


def test_loads_bounds_size_and_reads_bytes_and_surrogate_text() -> None:
    with pytest.raises(JSONTextError, match="more than the 10 toolplan reads") as info:
        loads("[" + "1," * 10 + "1]", max_chars=10)
    assert info.value.reason == "size"
    assert info.value.advice == "Send less text"
    assert loads(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(JSONTextError):
        loads('"\ud800"')  # a Python string holding a lone surrogate: an error, not UnicodeEncodeError


def test_too_deep_counts_levels_and_catches_cycles() -> None:
    assert not too_deep(nested_dict(MAX_DEPTH - 1))  # MAX_DEPTH dicts
    assert too_deep(nested_dict(MAX_DEPTH))
    assert too_deep(cyclic_list())
    assert not too_deep("text")


# --- the encoder ----------------------------------------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), '"NaN"'),
        ([float("inf"), float("-inf"), 1.5], '["Infinity","-Infinity",1.5]'),
        ("a\ud800b", '"a\ufffdb"'),
        ({"k\udc00": 1}, '{"k\ufffd":1}'),
        (10**5000, '"<an integer of about 5,001 digits: not shown>"'),
        (cyclic_list(), '[1,"<a value that contains itself: cut>"]'),
        ({(1, 2): Unprintable()}, '{"(1, 2)":"<Unprintable object>"}'),
        ({"s": {3}}, '{"s":"{3}"}'),
        ({"°C": "東京"}, '{"°C":"東京"}'),
    ],
    ids=lambda v: type(v).__name__,
)
def test_dumps_always_gives_valid_encodable_json(value: Any, expected: str) -> None:
    text = dumps(value)
    assert text == expected
    text.encode("utf-8")
    strict_loads(text)
    strict_loads(json.dumps(json_safe(value), allow_nan=False))


def test_dumps_cuts_values_nested_too_deep() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    deep.append(float("nan"))
    text = dumps(deep, indent=2, ensure_ascii=True)
    assert f"<nested deeper than {MAX_DEPTH} levels: cut>" in text
    assert text.isascii()
    assert "NaN" not in text.replace('"NaN"', "")


# --- plans and arguments --------------------------------------------------------------------------


def _plan_text(value_text: str) -> str:
    return '{"steps": [{"id": "a", "tool": "echo", "arguments": {"x": ' + value_text + "}}]}"


HOSTILE_PLANS: dict[str, tuple[Any, str]] = {
    "json nested 1,000 deep": (_plan_text(DEEP_1000), "invalid_json"),
    "json nested 100,000 deep": (_plan_text(DEEP_100000), "invalid_json"),
    "5,000-digit number": (_plan_text(BIG_NUMBER), "invalid_json"),
    "arguments string nested 1,000 deep": (
        {"steps": [{"id": "a", "tool": "echo", "arguments": '{"x": ' + DEEP_1000 + "}"}]},
        "invalid_arguments_json",
    ),
    "arguments string with a 5,000-digit number": (
        {"steps": [{"id": "a", "tool": "echo", "arguments": '{"x": ' + BIG_NUMBER + "}"}]},
        "invalid_arguments_json",
    ),
    "python dict nested 1,000 deep": (
        {"steps": [{"id": "a", "tool": "echo", "arguments": {"x": nested_dict(1000)}}]},
        "invalid_arguments_json",
    ),
    "python dict nested 1,000 deep in a fallback": (
        {"steps": [{"id": "a", "tool": "echo", "fallback": {"tool": "echo", "arguments": {"x": nested_dict(1000)}}}]},
        "invalid_arguments_json",
    ),
    "python dict nested 1,000 deep, chaining dialect": (
        {"tools": [{"name": "echo", "parameters": {"x": nested_dict(1000)}}]},
        "invalid_arguments_json",
    ),
    "python dict nested 1,000 deep, batch dialect": (
        {"steps": [{"tool": "echo", "args": {"x": nested_dict(1000)}}]},
        "invalid_arguments_json",
    ),
    "python value that contains itself": (
        {"steps": [{"id": "a", "tool": "echo", "arguments": {"x": cyclic_list()}}]},
        "invalid_arguments_json",
    ),
}


@pytest.mark.parametrize("name", HOSTILE_PLANS)
def test_validate_plan_reports_hostile_plans_as_issues(name: str) -> None:
    plan, code = HOSTILE_PLANS[name]
    report = validate_plan(plan, [echo])
    assert not report.ok
    assert [i.code for i in report.errors] == [code]
    message = report.errors[0].message
    assert "deeper than 200 levels" in message or "4,300 digits" in message


@pytest.mark.parametrize("name", HOSTILE_PLANS)
async def test_execute_plan_raises_only_plan_validation_error_and_runs_nothing(name: str) -> None:
    plan, code = HOSTILE_PLANS[name]
    called.clear()
    with pytest.raises(PlanValidationError) as info:
        await execute_plan(plan, [echo])
    assert [i.code for i in info.value.issues] == [code]
    assert called == []


def test_plan_arguments_up_to_the_depth_bound_are_accepted() -> None:
    def plan(depth: int) -> dict[str, Any]:  # the arguments object and ``depth`` dicts inside it
        return {"steps": [{"id": "a", "tool": "echo", "arguments": {"x": nested_dict(depth - 1)}}]}

    assert validate_plan(plan(MAX_DEPTH - 1), [echo]).ok
    assert [i.code for i in validate_plan(plan(MAX_DEPTH), [echo]).errors] == ["invalid_arguments_json"]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ('{"x": ' + DEEP_1000 + "}", "nested deeper than 200 levels"),
        ('{"x": ' + DEEP_100000 + "}", "nested deeper than 200 levels"),
        ('{"x": ' + BIG_NUMBER + "}", "a number with more than 4,300 digits"),
    ],
)
def test_parse_arguments_turns_hostile_json_into_a_tool_error(arguments: str, words: str) -> None:
    with pytest.raises(ToolError) as info:
        ToolCall(id="1", name="t", arguments=arguments).parse_arguments()
    assert words in info.value.message
    assert "Call the tool again" in info.value.message
    assert len(info.value.message) < 1000  # the arguments are clipped


async def test_agent_tells_the_model_about_hostile_arguments() -> None:
    called.clear()
    turn = AssistantMessage(
        tool_calls=(
            ToolCall(id="deep", name="echo", arguments='{"x": ' + DEEP_100000 + "}"),
            ToolCall(id="big", name="echo", arguments='{"x": ' + BIG_NUMBER + "}"),
            ToolCall(id="plan", name="execute_tool_plan", arguments=_plan_text(DEEP_1000)),
        )
    )
    model = ScriptedModel([turn, "done"])
    result = await Agent(model=model, tools=[echo], tool_planning=True).run("go")
    replies = {m.tool_call_id: m for m in result.messages if isinstance(m, ToolReturnMessage)}
    assert result.output == "done"
    assert all(m.is_error for m in replies.values())
    assert "nested deeper than 200 levels" in replies["deep"].content
    assert "4,300 digits" in replies["big"].content
    assert "nested deeper than 200 levels" in replies["plan"].content
    assert called == []


# --- references -----------------------------------------------------------------------------------


def compiled(arguments: dict[str, Any], steps: tuple[str, ...] = ("a", "b")) -> Any:
    problems: list[str] = []
    tree, _, _ = compile_arguments(arguments, steps, warn=lambda c, m: None, error=lambda c, m: problems.append(m))
    assert problems == []
    return tree


@pytest.mark.parametrize(
    ("arguments", "output", "words"),
    [
        ({"x": "$ref:a.0"}, DEEP_1000, "nested deeper than 200 levels"),
        ({"x": "$ref:a.0"}, "[" + BIG_NUMBER + "]", "4,300 digits"),
        ({"x": "first {{a.0}}"}, DEEP_100000, "nested deeper than 200 levels"),
        ({"x": "x {{a}}"}, 10**5000, "an integer with more than 4,300 digits"),
        ({"x": "x {{a}}"}, cyclic_list(), "contains itself"),
        ({"x": "$ref:a"}, cyclic_list(), "contains itself"),
        ({"x": ["$ref:a"]}, cyclic_list(), "contains itself"),
        ({"x": "{{a}}"}, {"k": cyclic_list()}, "contains itself"),
        ({"x": "$ref:a.k"}, {"k": cyclic_list()}, "contains itself"),
        ({"x": "$ref:a"}, nested_dict(1000), "nested deeper than 200 levels"),
        ({"x": "x {{a}}"}, nested_dict(100_000), "too deeply"),
        ({"x": "x {{a}}"}, [Unprintable()], "RuntimeError"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_resolving_raises_only_reference_resolution_error(arguments: dict[str, Any], output: Any, words: str) -> None:
    with pytest.raises(ReferenceResolutionError) as info:
        resolve(compiled(arguments), {"a": output})
    error = info.value
    assert error.code == "unresolvable_reference"
    assert error.source_step == "a"
    assert error.reference in error.message
    assert words in error.message
    assert "step 'a'" in error.message


def test_json_text_that_is_not_json_stays_text() -> None:
    assert resolve(compiled({"x": "$ref:a.k"}), {"a": "{not json"}) == {"x": None}
    assert resolve(compiled({"x": "$ref:a.k"}), {"a": '{"k": [1]}'}) == {"x": [1]}


def test_inserted_values_are_copies_the_reader_cannot_corrupt() -> None:
    output = {"items": [{"id": 1}], "pair": ({"t": [1]}, 2), "name": "n"}
    tree = compiled({"whole": "$ref:a", "field": "$ref:a.items", "typed": "{{a.pair}}", "in_list": ["$ref:a"]})
    first = resolve(tree, {"a": output})
    second = resolve(tree, {"a": output})
    first["whole"]["items"][0]["id"] = "changed"
    first["field"].append("more")
    first["typed"][0]["t"].append(2)
    first["in_list"][0]["name"] = "changed"
    assert output == {"items": [{"id": 1}], "pair": ({"t": [1]}, 2), "name": "n"}
    assert second["whole"] == output
    assert second["field"] == [{"id": 1}]


def test_scalars_and_other_objects_are_handed_over_as_they_are() -> None:
    class Box:
        pass

    box, text = Box(), "x" * 100
    args = resolve(compiled({"p": "$ref:a", "q": "$ref:b"}), {"a": box, "b": text})
    assert args["p"] is box
    assert args["q"] is text


def test_literal_arguments_are_not_copied() -> None:
    tree = compiled({"x": {"y": [1, 2]}})
    assert resolve(tree, {}) is resolve(tree, {})


async def test_a_tool_that_mutates_its_input_cannot_change_what_others_receive() -> None:
    received: list[Any] = []

    @tool
    def source() -> dict[str, Any]:
        return {"tags": ["a"]}

    @tool
    def vandal(data: Any) -> str:
        data["tags"].append("vandalised")
        return "done"

    @tool
    def reader(data: Any) -> Any:
        received.append(data)
        return data

    plan = {
        "steps": [
            {"id": "src", "tool": "source"},
            {"id": "v", "tool": "vandal", "arguments": {"data": "$ref:src"}},
            {"id": "r", "tool": "reader", "arguments": {"data": "$ref:src"}, "depends_on": ["v"]},
        ]
    }
    result = await execute_plan(plan, [source, vandal, reader])
    assert result.ok
    assert received == [{"tags": ["a"]}]
    assert result.steps["src"].output == {"tags": ["a"]}


# --- what the model and the CLI read --------------------------------------------------------------


def _result(*steps: StepResult, dialect: Any = "native") -> PlanResult:
    return PlanResult(
        status="failed",
        steps={s.id: s for s in steps},
        output_steps=tuple(s.id for s in steps),
        dialect=dialect,
        deps={s.id: () for s in steps},
    )


HOSTILE_STEPS = (
    StepResult(id="nan", tool="t", status="succeeded", output={"v": float("nan"), "w": [float("inf")]}),
    StepResult(id="sur", tool="t", status="succeeded", output="lone \ud800 surrogate"),
    StepResult(id="cyc", tool="t", status="succeeded", output=cyclic_list()),
    StepResult(id="big", tool="t", status="succeeded", output=10**5000),
    StepResult(id="obj", tool="t", status="succeeded", output={"u": Unprintable()}),
    StepResult(id="err", tool="t", status="failed", error=StepError(kind="business", message="E" * 2_000_000)),
    StepResult(id="serr", tool="t", status="failed", error=StepError(kind="business", message="bad \udfff")),
)


@pytest.mark.parametrize("dialect", ["native", "batch"])
def test_model_text_is_valid_encodable_and_capped(dialect: str) -> None:
    result = _result(*HOSTILE_STEPS, dialect=dialect)
    text = result.to_model_text(max_value_chars=500)
    text.encode("utf-8")
    data = strict_loads(text)
    assert len(text) < 5000  # the 2 MB error is capped like a value
    flat = json.dumps(data)
    assert "chars cut" in flat
    if dialect == "native":
        assert data["outputs"]["nan"] == {"v": "NaN", "w": ["Infinity"]}
        assert data["outputs"]["sur"] == "lone \ufffd surrogate"


def test_to_dict_is_json_data() -> None:
    data = _result(*HOSTILE_STEPS).to_dict()
    text = json.dumps(data, allow_nan=False)  # the standard library can write it, strictly
    text.encode("utf-8")
    assert data["outputs"]["nan"] == {"v": "NaN", "w": ["Infinity"]}
    assert data["outputs"]["cyc"] == [1, "<a value that contains itself: cut>"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ("lone \ud800", "lone \ufffd"),
        ({"v": float("nan")}, '{"v":"NaN"}'),
        (cyclic_list(), '[1,"<a value that contains itself: cut>"]'),
    ],
)
def test_tool_content_is_encodable(value: Any, expected: str) -> None:
    content = tool_content(value)
    assert content == expected
    content.encode("utf-8")
