"""A policy's statistics in the store: they survive a restart and concurrent writers lose nothing."""

from __future__ import annotations

import asyncio

import pytest

from toolplan.execute import ChoiceOutcome, ChoiceRequest
from toolplan.policy import Observation, StatsStore, ToolPolicy
from toolplan.store import open_store


async def test_the_store_implements_the_policy_protocol(stats_url: str) -> None:
    async with open_store(stats_url) as store:
        assert isinstance(store, StatsStore)
        assert await store.load_tool_stats("nothing") == {}


async def test_statistics_survive_a_restart_and_are_shared(stats_url: str) -> None:
    now = [1_000.0]
    async with open_store(stats_url) as store:
        policy = ToolPolicy("greedy", store=store, half_life=100.0, clock=lambda: now[0])
        for ok in (True, True, False):
            choice = await policy.choose(ChoiceRequest(group="g", candidates=("a",)))
            await policy.observe(choice, ChoiceOutcome(ok=ok, latency=0.5, cost=1.0, cost_scale=1.0))
    now[0] += 100.0  # one half-life later, in another process
    async with open_store(stats_url) as store:
        fresh = ToolPolicy("greedy", store=store, half_life=100.0, clock=lambda: now[0])
        stats = await fresh.load_stats("g")
    a = stats["a"]
    assert a.n == pytest.approx(1.5) and a.successes == pytest.approx(1.0)
    assert a.success_rate == pytest.approx(2 / 3) and a.mean_latency == pytest.approx(0.5)


async def test_concurrent_observations_are_all_counted(stats_url: str) -> None:
    async with open_store(stats_url) as one:
        await one.load_tool_stats("g")  # the schema is made once (two stores opening a new file at once race)
        async with open_store(stats_url) as two:
            await two.load_tool_stats("g")
    async with open_store(stats_url) as one, open_store(stats_url) as two:
        obs = Observation(reward=1.0, ok=True, latency=0.1, cost=1.0, at=10.0)
        await asyncio.gather(
            *(s.record_tool_stats("g", "t", obs, None) for s in [one, two] * 20),
        )
        stats = await one.load_tool_stats("g")
    assert stats["t"].n == 40 and stats["t"].reward == 40


async def test_a_policy_uses_what_another_process_learnt(stats_url: str) -> None:
    async with open_store(stats_url) as store:
        teacher = ToolPolicy("greedy", store=store)
        for tool, ok in (("bad", False), ("good", True)):
            choice = await teacher.choose(ChoiceRequest(group="g", candidates=(tool,)))
            await teacher.observe(choice, ChoiceOutcome(ok=ok, latency=0.0, cost=0.0))
        learner = ToolPolicy("greedy", store=store)
        choice = await learner.choose(ChoiceRequest(group="g", candidates=("bad", "good")))
    assert choice.chosen == "good"
