"""The five explore/exploit formulas, on the standard library alone.

Each takes the arms' statistics (decayed count ``n`` and reward sum ``s``, rewards in [0, 1]) and a
seeded `random.Random`, and returns the index of the arm to pull and the probability the strategy
gave it (for offline evaluation of the choices). Arms never tried are tried first, in order, by
``greedy``, ``epsilon_greedy``, ``ucb1`` and ``softmax``; ``thompson``'s uniform prior covers them.

- ``greedy``: the best mean reward.
- ``epsilon_greedy``: with probability epsilon an arm drawn uniformly, else the greedy one.
- ``ucb1``: the best ``mean + sqrt(2 ln N / n)`` (Auer, Cesa-Bianchi and Fischer 2002), N the total count.
- ``softmax``: an arm drawn with probability proportional to ``exp(mean / temperature)`` (Boltzmann
  exploration): a low temperature is nearly greedy, a high one nearly uniform.
- ``thompson``: the best draw from each arm's Beta(1 + s, 1 + n - s) posterior (fractional rewards
  count as fractional successes).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal, TypeAlias, get_args

__all__ = (
    "STRATEGIES",
    "Strategy",
    "epsilon_greedy",
    "greedy",
    "pick",
    "softmax",
    "thompson",
    "thompson_probabilities",
    "ucb1",
)

Strategy: TypeAlias = Literal["greedy", "epsilon_greedy", "ucb1", "thompson", "softmax"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)

Arm = tuple[float, float]  # (n, s): decayed count and decayed reward sum


def _untried(arms: Sequence[Arm]) -> int | None:
    return next((i for i, (n, _s) in enumerate(arms) if n <= 0.0), None)


def _mean(arm: Arm) -> float:
    n, s = arm
    return s / n if n > 0 else 0.0


def _best(scores: Sequence[float]) -> tuple[int, int]:
    """The first index of the highest score, and how many indices share it."""
    top = max(scores)
    ties = [i for i, x in enumerate(scores) if x == top]
    return ties[0], len(ties)


def greedy(arms: Sequence[Arm], rng: random.Random) -> tuple[int, float]:
    """The arm with the best mean reward (an untried arm first)."""
    untried = _untried(arms)
    if untried is not None:
        return untried, 1.0
    index, _ties = _best([_mean(a) for a in arms])
    return index, 1.0


def epsilon_greedy(arms: Sequence[Arm], rng: random.Random, epsilon: float = 0.1) -> tuple[int, float]:
    """With probability ``epsilon`` a uniformly drawn arm, else `greedy`'s (an untried arm first)."""
    untried = _untried(arms)
    if untried is not None:
        return untried, 1.0
    k = len(arms)
    best, _ties = _best([_mean(a) for a in arms])
    index = rng.randrange(k) if rng.random() < epsilon else best
    probability = epsilon / k + (1.0 - epsilon if index == best else 0.0)
    return index, probability


def ucb1(arms: Sequence[Arm], rng: random.Random) -> tuple[int, float]:
    """The best upper confidence bound ``mean + sqrt(2 ln N / n)`` (each arm once first)."""
    untried = _untried(arms)
    if untried is not None:
        return untried, 1.0
    total = max(sum(n for n, _s in arms), 1.0)
    log_total = math.log(total)
    scores = [_mean(a) + math.sqrt(2.0 * log_total / a[0]) for a in arms]
    index, _ties = _best(scores)
    return index, 1.0


def softmax(arms: Sequence[Arm], rng: random.Random, temperature: float = 0.1) -> tuple[int, float]:
    """An arm drawn with probability proportional to ``exp(mean / temperature)`` (an untried arm first)."""
    untried = _untried(arms)
    if untried is not None:
        return untried, 1.0
    means = [_mean(a) for a in arms]
    top = max(means)
    weights = [math.exp((m - top) / temperature) for m in means]  # shifted by the best: no overflow
    total = sum(weights)
    draw = rng.random() * total
    index = len(arms) - 1
    for i, w in enumerate(weights):
        draw -= w
        if draw < 0.0:
            index = i
            break
    return index, weights[index] / total


def thompson(arms: Sequence[Arm], rng: random.Random, *, with_probability: bool = True) -> tuple[int, float]:
    """The best draw from each arm's Beta(1 + s, 1 + n - s); the probability by numerical integration."""
    draws = [rng.betavariate(1.0 + s, 1.0 + max(n - s, 0.0)) for n, s in arms]
    index, _ties = _best(draws)
    if not with_probability:
        return index, float("nan")
    return index, thompson_probabilities(arms)[index]


_GRID = 256


def thompson_probabilities(arms: Sequence[Arm]) -> list[float]:
    """The probability that each arm's Beta posterior draw is the highest: ∫ f_i(x) Π_j≠i F_j(x) dx.

    On a grid of 256 points over the span where the posteriors have mass (8 standard deviations
    around each mean), with densities normalised on the grid: accurate to about 1e-3.
    """
    params = [(1.0 + s, 1.0 + max(n - s, 0.0)) for n, s in arms]
    lows, highs = [], []
    for a, b in params:
        mean = a / (a + b)
        sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
        lows.append(mean - 8.0 * sd)
        highs.append(mean + 8.0 * sd)
    lo, hi = max(min(lows), 0.0), min(max(highs), 1.0)
    if hi <= lo:
        return [1.0 / len(arms)] * len(arms)
    step = (hi - lo) / _GRID
    xs = [lo + (i + 0.5) * step for i in range(_GRID)]
    masses: list[list[float]] = []
    cdfs: list[list[float]] = []
    for a, b in params:
        norm = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        logs = [(a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - norm for x in xs]
        top = max(logs)
        weights = [math.exp(v - top) for v in logs]
        total = sum(weights)
        mass = [w / total for w in weights]
        cdf, run = [], 0.0
        for m in mass:
            cdf.append(run + m / 2.0)  # the CDF at the cell's middle
            run += m
        masses.append(mass)
        cdfs.append(cdf)
    # P(i highest) = sum over cells of mass_i * prod_{j != i} cdf_j: the product over all arms, less arm i's own.
    everyone = [math.prod(cdf[g] for cdf in cdfs) for g in range(_GRID)]
    out = [
        sum(m * everyone[g] / cdfs[i][g] for g, m in enumerate(masses[i]) if cdfs[i][g] > 0.0) for i in range(len(arms))
    ]
    total = sum(out)
    return [p / total for p in out] if total > 0 else [1.0 / len(arms)] * len(arms)


def pick(
    strategy: Strategy,
    arms: Sequence[Arm],
    rng: random.Random,
    *,
    epsilon: float = 0.1,
    temperature: float = 0.1,
    with_probability: bool = True,
) -> tuple[int, float]:
    """The arm ``strategy`` pulls, and the probability it gave that arm."""
    if strategy == "thompson":
        return thompson(arms, rng, with_probability=with_probability)
    if strategy == "ucb1":
        return ucb1(arms, rng)
    if strategy == "epsilon_greedy":
        return epsilon_greedy(arms, rng, epsilon)
    if strategy == "greedy":
        return greedy(arms, rng)
    if strategy == "softmax":
        return softmax(arms, rng, temperature)
    raise ValueError(f"unknown strategy {strategy!r}")
