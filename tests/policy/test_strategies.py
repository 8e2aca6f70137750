"""The four formulas, checked by hand, and the policy's determinism."""

from __future__ import annotations

import math
import random

import pytest

from toolplan.execute import ChoiceOutcome, ChoiceRequest
from toolplan.policy import RewardWeights, ToolPolicy, parse_policy
from toolplan.policy._strategies import epsilon_greedy, greedy, pick, thompson_probabilities, ucb1


def test_untried_arms_come_first_for_greedy_epsilon_and_ucb1() -> None:
    arms = [(3.0, 2.0), (0.0, 0.0), (1.0, 1.0)]
    for strategy in (greedy, ucb1, epsilon_greedy):
        assert strategy(arms, random.Random(0)) == (1, 1.0)


def test_greedy_takes_the_best_mean() -> None:
    assert greedy([(4.0, 2.0), (2.0, 1.8), (10.0, 5.0)], random.Random(0)) == (1, 1.0)


def test_epsilon_greedy_probabilities() -> None:
    arms = [(4.0, 2.0), (2.0, 1.8), (10.0, 5.0)]
    rng = random.Random(7)
    seen = {}
    for _ in range(2000):
        index, p = epsilon_greedy(arms, rng, epsilon=0.3)
        seen[index] = p
    assert seen[1] == pytest.approx(0.7 + 0.1)  # the greedy arm: 1 - eps + eps/k
    assert seen[0] == pytest.approx(0.1) and seen[2] == pytest.approx(0.1)


def test_ucb1_is_the_textbook_index() -> None:
    arms = [(10.0, 9.0), (2.0, 1.0), (20.0, 16.0)]
    total = 32.0
    scores = [s / n + math.sqrt(2 * math.log(total) / n) for n, s in arms]
    assert ucb1(arms, random.Random(0)) == (scores.index(max(scores)), 1.0) == (1, 1.0)


def test_thompson_probabilities_sum_to_one_and_match_sampling() -> None:
    arms = [(20.0, 15.0), (10.0, 6.0), (5.0, 2.0)]
    exact = thompson_probabilities(arms)
    assert sum(exact) == pytest.approx(1.0)
    rng = random.Random(3)
    wins = [0, 0, 0]
    draws = 20_000
    for _ in range(draws):
        samples = [rng.betavariate(1 + s, 1 + n - s) for n, s in arms]
        wins[samples.index(max(samples))] += 1
    for p, w in zip(exact, wins, strict=True):
        assert p == pytest.approx(w / draws, abs=0.015)


def test_thompson_probability_of_a_sure_arm_is_near_one() -> None:
    p = thompson_probabilities([(2000.0, 1900.0), (2000.0, 1000.0)])
    assert p[0] > 0.999


@pytest.mark.parametrize("strategy", ["greedy", "epsilon_greedy", "ucb1", "thompson"])
def test_the_same_seed_and_outcomes_give_the_same_choices(strategy: str) -> None:
    def choices(seed: int) -> list[int]:
        rng, env = random.Random(seed), random.Random(99)
        arms = [[0.0, 0.0] for _ in range(3)]
        out = []
        for _ in range(200):
            i, _p = pick(strategy, [(a[0], a[1]) for a in arms], rng)  # type: ignore[arg-type]
            arms[i][0] += 1
            arms[i][1] += 1.0 if env.random() < (0.9, 0.5, 0.2)[i] else 0.0
            out.append(i)
        return out

    assert choices(1) == choices(1)


def test_reward_weights() -> None:
    w = RewardWeights(latency=0.2, cost=0.2, default_latency_scale=10.0)
    assert w.reward(ChoiceOutcome(ok=False, latency=0.0, cost=0.0)) == 0.0
    ok = ChoiceOutcome(ok=True, latency=5.0, cost=1.0, cost_scale=2.0)
    assert w.reward(ok) == pytest.approx(1 - 0.2 * 0.5 - 0.2 * 0.5)
    slow = ChoiceOutcome(ok=True, latency=30.0, cost=4.0, latency_scale=2.0, cost_scale=2.0)  # capped at 1 each
    assert w.reward(slow) == pytest.approx(0.6)
    with pytest.raises(Exception, match="add up to at most 1"):
        RewardWeights(latency=0.7, cost=0.5)


def test_plan_policy_text() -> None:
    assert parse_policy("ucb1") == ("ucb1", None)
    assert parse_policy("Thompson + prefer_general_methods") == ("thompson", "always")
    assert parse_policy("ucb, cheap please") == ("ucb1", None)
    assert parse_policy(None) == (None, None)


async def test_prefer_general_methods_when_the_budget_is_tight_or_always() -> None:
    policy = ToolPolicy("ucb1", seed=0)
    request = ChoiceRequest(group="g", candidates=("special", "general"), general="general", budget_left=0.5)
    first = await policy.choose(request)
    assert first.strategy == "ucb1" and first.chosen == "special"  # untried, first
    tight = await policy.choose(
        ChoiceRequest(group="g", candidates=("special", "general"), general="general", budget_left=0.1)
    )
    assert (tight.chosen, tight.strategy, tight.probability) == ("general", "prefer_general_methods", 1.0)
    assert "10%" in tight.reason
    asked = await policy.choose(
        ChoiceRequest(
            group="g", candidates=("special", "general"), general="general", strategy="greedy,prefer_general_methods"
        )
    )
    assert asked.chosen == "general"
    never = ToolPolicy("greedy", prefer_general_methods="never")
    low = await never.choose(
        ChoiceRequest(group="g", candidates=("special", "general"), general="general", budget_left=0.0)
    )
    assert low.chosen == "special"


async def test_a_plan_strategy_overrides_the_policy_strategy() -> None:
    policy = ToolPolicy("thompson", seed=0)
    choice = await policy.choose(ChoiceRequest(group="g", candidates=("a", "b"), strategy="greedy"))
    assert choice.strategy == "greedy"


async def test_statistics_decay_with_their_half_life() -> None:
    now = [1000.0]
    policy = ToolPolicy("greedy", half_life=10.0, clock=lambda: now[0])
    choice = await policy.choose(ChoiceRequest(group="g", candidates=("a", "b")))
    await policy.observe(choice, ChoiceOutcome(ok=True, latency=0.0, cost=0.0))
    now[0] += 10.0
    assert policy.stats("g")["a"].n == pytest.approx(0.5)
    now[0] += 10.0
    assert policy.stats("g")["a"].n == pytest.approx(0.25)


def test_bad_settings_are_refused_with_what_to_do() -> None:
    with pytest.raises(Exception, match="Choose one of: greedy, epsilon_greedy, ucb1, thompson"):
        ToolPolicy("bandit")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="half_life must be > 0"):
        ToolPolicy(half_life=0)
