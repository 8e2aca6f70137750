"""Model spend caps: an agent run stopped at the request that would pass its token cap, and its money.

A `FunctionModel` plays the model (no API key, no network) and reports the usage a provider would:
each answer reads 1,200 input tokens (1,000 of them from the prompt cache) and writes 80.

Run: python examples/spend/spend_caps.py
"""

from __future__ import annotations

from toolplan import Agent, ModelPrice, SpendLimits, UsageLimitExceeded, tool
from toolplan.models import AssistantMessage, ModelMessage, ModelResponse, ToolCall, Usage
from toolplan.testing import FunctionInfo, FunctionModel

EACH = Usage(requests=1, input_tokens=1_200, output_tokens=80, cached_input_tokens=1_000)
PRICES = {"researcher": ModelPrice(input=2.50, output=10.00, cached_input=1.25)}  # per million tokens


@tool(read_only=True)
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


def keeps_searching(messages: list[ModelMessage], info: FunctionInfo) -> ModelResponse:
    """A model that never stops searching: only a cap ends its run."""
    turn = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    call = ToolCall(id=f"call_{turn}", name="search", arguments=f'{{"query": "angle {turn}"}}')
    return ModelResponse(message=AssistantMessage(content=f"Searching, turn {turn}.", tool_calls=(call,)), usage=EACH)


def main() -> None:
    model = FunctionModel(keeps_searching, model_name="researcher")
    agent = Agent(model, tools=[search], spend=SpendLimits(max_total_tokens=5_000, prices=PRICES))
    try:
        agent.run_sync("Find everything about prompt caching.")
    except UsageLimitExceeded as exc:
        print(f"stopped at {exc.limit} after {len(model.requests)} model requests")
        usage = exc.usage
        print(f"tokens: {usage.input_tokens} in ({usage.cached_input_tokens} cached), {usage.output_tokens} out")
        print(f"money: {exc.money:.6f}")
        print(f"partial result: {exc.result.status}, last text {exc.result.output!r}")

    # The same caps with on_limit="return": the partial result comes back instead of an exception.
    agent = Agent(model, tools=[search], spend=SpendLimits(max_money=0.004, prices=PRICES), on_limit="return")
    result = agent.run_sync("Find everything about prompt caching.")
    print(f"{result.status}: {result.usage.requests} requests, money {result.money:.6f} ({result.error})")


if __name__ == "__main__":
    main()
