"""Structured output: ``Agent(output_type=...)``, the ``final_result`` tool, validation and retries."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, Field

from toolplan import OutputValidationError, UnexpectedModelBehavior, UserError, tool
from toolplan.agent import OUTPUT_TOOL_NAME, Agent
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage, UserMessage
from toolplan.testing import FunctionInfo, FunctionModel, ScriptedModel, TestModel


class City(BaseModel):
    name: str
    population: int = Field(ge=0)


def final(args: Any, call_id: str = "f1") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=OUTPUT_TOOL_NAME, arguments=json.dumps(args)),))


@tool
def lookup(city: str) -> int:
    """Population of a city."""
    return 700_000


def test_the_default_str_output_offers_no_extra_tool() -> None:
    model = TestModel()
    result = Agent(model, tools=[lookup]).run_sync("go")
    assert isinstance(result.output, str)
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    assert "final_result" not in Agent(model).system_prompt()


def test_a_pydantic_model_output_comes_from_the_final_result_tool() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="l", name="lookup", arguments='{"city": "Oslo"}'),)),
            final({"name": "Oslo", "population": 700000}),
        ]
    )
    result = Agent(model, tools=[lookup], output_type=City).run_sync("How many live in Oslo?")
    assert result.output == City(name="Oslo", population=700000)
    assert result.status == "completed" and result.tool_calls == 1
    offered = model.requests[0].tools[-1]
    assert offered.name == "final_result"
    assert offered.parameters_json_schema["properties"]["population"] == {"type": "integer", "minimum": 0}
    assert "final_result" in model.requests[0].messages[0].content  # type: ignore[operator]
    # The conversation stays complete: every call has its reply.
    assert [m.content for m in result.messages if isinstance(m, ToolReturnMessage)] == [
        "700000",
        "Final result received.",
    ]


def test_a_non_object_output_is_wrapped_as_response() -> None:
    model = ScriptedModel([final({"response": [1, 2, 3]})])
    result = Agent(model, output_type=list[int]).run_sync("numbers")
    assert result.output == [1, 2, 3]
    schema = model.requests[0].tools[-1].parameters_json_schema
    assert schema["required"] == ["response"] and schema["properties"]["response"]["type"] == "array"


def test_a_text_answer_holding_valid_json_is_accepted() -> None:
    model = ScriptedModel(['```json\n{"name": "Rome", "population": 3}\n```'])
    assert Agent(model, output_type=City).run_sync("go").output == City(name="Rome", population=3)


def test_an_invalid_answer_goes_back_with_the_problems_and_is_retried() -> None:
    seen: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        seen.append(messages)
        if len(seen) == 1:
            return final({"name": "Oslo", "population": -5})
        return final({"name": "Oslo", "population": 5}, call_id="f2")

    result = Agent(FunctionModel(answer), output_type=City).run_sync("go")
    assert result.output == City(name="Oslo", population=5)
    reply = seen[1][-1]
    assert isinstance(reply, ToolReturnMessage) and reply.is_error
    assert "population: Input should be greater than or equal to 0 (got -5)" in reply.content
    assert f"Call {OUTPUT_TOOL_NAME} again" in reply.content


def test_an_invalid_text_answer_is_retried_with_a_user_message() -> None:
    model = ScriptedModel(["Oslo has many people.", final({"name": "Oslo", "population": 1})])
    result = Agent(model, output_type=City).run_sync("go")
    assert result.output.population == 1
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage) and "not a valid final result" in retry.content
    assert "calling the final_result tool" in retry.content


def test_retries_are_bounded_and_the_error_carries_the_partial_result() -> None:
    model = ScriptedModel([final({"name": "x"}), final({"name": "y"}, call_id="f2"), final({"name": "z"}, "f3")])
    with pytest.raises(OutputValidationError) as info:
        Agent(model, output_type=City, output_retries=2).run_sync("go")
    error = info.value
    assert isinstance(error, UnexpectedModelBehavior) and error.code == "invalid_output"
    assert "did not validate as City after 2 retries" in error.message
    assert "population: Field required" in error.message
    assert error.result.status == "output_invalid" and error.result.output is None
    model.assert_consumed()
    again = pickle.loads(pickle.dumps(error))
    assert again.message == error.message and again.result.status == "output_invalid"


def test_zero_output_retries_fails_on_the_first_invalid_answer() -> None:
    with pytest.raises(OutputValidationError, match="after 0 retries"):
        Agent(ScriptedModel(["not json"]), output_type=City, output_retries=0).run_sync("go")


def test_test_model_answers_with_schema_valid_output() -> None:
    model = TestModel()
    result = Agent(model, tools=[lookup], output_type=City, tool_planning=True).run_sync("go")
    assert isinstance(result.output, City) and result.output.population >= 0
    assert result.plan_results[0].status == "succeeded"  # final_result is not a step of the plan
    assert result.plan_results[0].outputs == {"lookup": 700000}
    custom = Agent(TestModel(custom_output_args={"name": "Bergen", "population": 2}), output_type=City)
    assert custom.run_sync("go").output == City(name="Bergen", population=2)


def test_misuse_is_a_clear_user_error() -> None:
    @tool
    def final_result(x: int) -> int:
        return x

    with pytest.raises(UserError, match="'final_result' is reserved"):
        Agent(TestModel(), tools=[final_result], output_type=City)
    Agent(TestModel(), tools=[final_result])  # a plain str agent may have such a tool
    with pytest.raises(UserError, match="on_limit='return' needs output_type=str"):
        Agent(TestModel(), output_type=City, on_limit="return")
    with pytest.raises(UserError, match="output_retries must be"):
        Agent(TestModel(), output_type=City, output_retries=-1)

    class Opaque:
        pass

    with pytest.raises(UserError, match="has no JSON Schema"):
        Agent(TestModel(), output_type=Opaque)


def test_hostile_answers_get_a_bounded_message() -> None:
    huge = "9" * 5000  # an integer Python refuses to turn back into text
    many = {"name": "x" * 10_000, "population": "lots"}
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name=OUTPUT_TOOL_NAME, arguments=f'{{"name": {huge}}}'),)),
            final(many, call_id="2"),
            final({"name": "ok", "population": 1}, call_id="3"),
        ]
    )
    result = Agent(model, output_type=City, output_retries=2).run_sync("go")
    assert result.output == City(name="ok", population=1)
    problems = [m.content for m in result.messages if isinstance(m, ToolReturnMessage) and m.is_error]
    assert len(problems) == 2 and all(len(p) < 600 for p in problems)
