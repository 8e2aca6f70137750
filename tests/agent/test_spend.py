"""Model spend caps of an agent run: checked before each request and after each response."""

from __future__ import annotations

import pytest

from toolplan import Agent, ModelPrice, SpendLimits, UsageLimitExceeded, UserError, tool
from toolplan.models import AssistantMessage, ModelMessage, ModelResponse, ToolCall, Usage
from toolplan.testing import FunctionInfo, FunctionModel, TestModel


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def pinging(usage: Usage, *, answer_after: int = 99) -> FunctionModel:
    """A model that calls ping each turn (answers "done" on turn ``answer_after``), each answer using ``usage``."""

    def answer(messages: list[ModelMessage], info: FunctionInfo) -> ModelResponse:
        turn = sum(isinstance(m, AssistantMessage) for m in messages) + 1
        if turn >= answer_after:
            return ModelResponse(message=AssistantMessage(content="done"), usage=usage)
        call = ToolCall(id=f"c{turn}", name="ping", arguments="{}")
        return ModelResponse(message=AssistantMessage(content=f"turn {turn}", tool_calls=(call,)), usage=usage)

    return FunctionModel(answer)


EACH = Usage(requests=1, input_tokens=100, output_tokens=10)


def test_total_tokens_cap_stops_the_run_before_the_request_that_would_pass_it() -> None:
    model = pinging(EACH)
    agent = Agent(model, tools=[ping], spend=SpendLimits(max_total_tokens=250))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.run_sync("go")
    error = info.value
    # request 3 would read the 100 tokens request 2 read and more: 220 + 100+ >= 250, so it is never sent
    assert len(model.requests) == 2
    assert error.limit == "max_total_tokens" and "max_total_tokens=250" in error.message
    assert error.usage == Usage(requests=2, input_tokens=200, output_tokens=20)
    assert error.money is None
    partial = error.result
    assert partial.status == "usage_limit" and partial.usage.total_tokens == 220 and partial.tool_calls == 2


def test_input_cap_counts_the_first_request_before_it_is_sent() -> None:
    model = TestModel()
    agent = Agent(model, tools=[ping], spend=SpendLimits(max_input_tokens=3))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.run_sync("a question of more than three words")
    assert model.requests == [] and info.value.limit == "max_input_tokens"
    assert "at least 7 input tokens" in info.value.message


def test_money_cap_at_the_price_table() -> None:
    # 100 000 input tokens at 10 and 10 000 output at 20 per million: 1.0 + 0.2 per answer
    model = pinging(Usage(requests=1, input_tokens=100_000, output_tokens=10_000))
    spend = SpendLimits(max_money=2.0, prices={"function": ModelPrice(input=10.0, output=20.0)})
    with pytest.raises(UsageLimitExceeded) as info:
        Agent(model, tools=[ping], spend=spend).run_sync("go")
    # the second request reads at least the first's 100 000 tokens (1.0): 1.2 + 1.0 > 2.0
    assert len(model.requests) == 1
    assert info.value.limit == "max_money" and info.value.money == pytest.approx(1.2)
    assert info.value.result.money == pytest.approx(1.2)


def test_a_response_that_passes_a_cap_ends_the_run_with_its_text() -> None:
    model = pinging(Usage(requests=1, input_tokens=5, output_tokens=40), answer_after=1)
    with pytest.raises(UsageLimitExceeded) as info:
        Agent(model, spend=SpendLimits(max_output_tokens=30)).run_sync("go")
    assert info.value.limit == "max_output_tokens" and "over max_output_tokens=30" in info.value.message
    assert info.value.result.output == "done" and info.value.usage.output_tokens == 40


def test_on_limit_return_gives_the_partial_result() -> None:
    model = pinging(EACH)
    result = Agent(model, tools=[ping], spend=SpendLimits(max_total_tokens=250), on_limit="return").run_sync("go")
    assert result.status == "usage_limit" and result.error is not None and "max_total_tokens" in result.error
    assert result.output == "turn 2" and result.usage.requests == 2


def test_a_finished_run_reports_its_money_and_cached_tokens() -> None:
    usage = Usage(requests=1, input_tokens=1000, output_tokens=100, cached_input_tokens=800)
    model = pinging(usage, answer_after=2)
    price = ModelPrice(input=1.0, output=4.0, cached_input=0.1)
    result = Agent(model, tools=[ping], spend=SpendLimits(prices={"function": price})).run_sync("go")
    assert result.status == "completed" and result.output == "done"
    assert result.usage.cached_input_tokens == 1600
    assert result.money == pytest.approx(2 * (200 * 1.0 + 800 * 0.1 + 100 * 4.0) / 1e6)


def test_no_spend_reports_no_money() -> None:
    result = Agent(TestModel(), tools=[ping]).run_sync("go")
    assert result.money is None and result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_money_cap_without_a_price_is_refused_when_the_agent_is_made() -> None:
    with pytest.raises(UserError, match="no price for model 'function'"):
        Agent(pinging(EACH), spend=SpendLimits(max_money=1.0))
    agent = Agent(pinging(EACH), spend=SpendLimits(max_money=1.0, prices={"function": ModelPrice(input=1, output=1)}))
    with agent.override(model=TestModel()), pytest.raises(UserError, match="no price for model 'test'"):
        agent.run_sync("go")
    with pytest.raises(UserError, match=r"spend must be a toolplan\.SpendLimits"):
        Agent(TestModel(), spend={"max_money": 1.0})  # type: ignore[arg-type]


async def test_streamed_runs_are_capped_too() -> None:
    model = pinging(EACH)
    agent = Agent(model, tools=[ping], spend=SpendLimits(max_total_tokens=250))
    with pytest.raises(UsageLimitExceeded) as info:
        async with agent.run_stream("go") as stream:
            async for _ in stream:
                pass
    assert info.value.limit == "max_total_tokens" and len(model.requests) == 2
