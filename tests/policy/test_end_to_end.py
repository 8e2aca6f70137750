"""An agent with three alternative search tools learns, over runs sharing a store, to call the good one."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import pytest

from toolplan import Agent, ToolRegistry, tool
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.policy import RewardWeights, ToolPolicy
from toolplan.store import open_store
from toolplan.testing import FunctionInfo, FunctionModel

SLOW_SECONDS = 0.05
RUNS = 30
LAST = 10


def search_tools() -> tuple[ToolRegistry, collections.Counter[str]]:
    calls: collections.Counter[str] = collections.Counter()

    @tool(read_only=True)
    def flaky_search(query: str) -> str:
        """Search (fails every other call)."""
        calls["flaky_search"] += 1
        if calls["flaky_search"] % 2:
            raise ConnectionError("flaky_search: connection reset")
        return f"flaky results for {query}"

    @tool(read_only=True)
    async def slow_search(query: str) -> str:
        """Search (slow)."""
        calls["slow_search"] += 1
        await asyncio.sleep(SLOW_SECONDS)
        return f"slow results for {query}"

    @tool(read_only=True, general=True)
    def good_search(query: str) -> str:
        """Search (fast and reliable)."""
        calls["good_search"] += 1
        return f"good results for {query}"

    registry = ToolRegistry([flaky_search, slow_search, good_search])
    registry.add_group("web_search", ["flaky_search", "slow_search", "good_search"], description="Search the web.")
    return registry, calls


def searching_model() -> FunctionModel:
    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        last = messages[-1]
        if isinstance(last, ToolReturnMessage):
            return AssistantMessage(content=f"Found: {last.content}")
        return AssistantMessage(tool_calls=(ToolCall(id="c1", name="web_search", arguments='{"query": "toolplan"}'),))

    return FunctionModel(answer)


# Latency counts: a call taking SLOW_SECONDS loses half of the latency weight.
WEIGHTS = RewardWeights(latency=0.6, cost=0.0, default_latency_scale=2 * SLOW_SECONDS)


@pytest.mark.slow
async def test_an_agent_learns_to_prefer_the_good_search_tool_across_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    registry, calls = search_tools()
    chosen: list[str] = []
    for run in range(RUNS):
        # A new store, policy and agent per run: what is learnt lives in the database only.
        async with open_store(url) as store:
            policy = ToolPolicy("thompson", seed=run, store=store, weights=WEIGHTS)
            agent = Agent(searching_model(), tools=registry, policy=policy)
            result = await agent.run("Search for toolplan.")
        choices = [c for r in result.call_results for c in r.choices]
        assert [c.group for c in choices] == ["web_search"]
        assert choices[0].strategy == "thompson" and 0.0 < choices[0].probability <= 1.0
        assert result.call_results[0].steps["call0"].tool == choices[0].chosen  # the record names what ran
        chosen.append(choices[0].chosen)
    assert set(chosen[: RUNS - LAST]) >= {"flaky_search", "slow_search"}  # it explored
    assert collections.Counter(chosen[-LAST:])["good_search"] >= LAST - 2  # and then kept to the good one
    async with open_store(url) as store:
        stats = await ToolPolicy(store=store).load_stats("web_search")
    assert max(stats, key=lambda t: stats[t].mean_reward) == "good_search"
    assert stats["flaky_search"].success_rate < 1.0 and stats["good_search"].success_rate == 1.0
    assert sum(calls.values()) == RUNS
