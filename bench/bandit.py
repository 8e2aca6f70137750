"""Benchmark: explore/exploit over three simulated alternative tools (``python -m bench bandit --seed 0``).

The tools (issue 22): success 0.95 / 0.80 / 0.60, latency 300 / 100 / 50 ms (each call within
±20%), cost 1.0 / 2.0 / 0.5 budget units. Each round one `toolplan.policy.ToolPolicy` chooses a
tool through its public API (``choose`` with a `ChoiceRequest`, ``observe`` with a
`ChoiceOutcome`), exactly as a run does; the simulated clock advances by the call's latency. The
reward is the library's default (`RewardWeights`: a failure earns 0, a success
``1 - 0.2 * latency / 1 s - 0.2 * cost / dearest cost``; 1 s stands for the run's deadline), so the
reward-best tool is ``reliable`` (expected reward 0.798, then 0.624 and 0.564).

2,000 rounds, 20 seeds (``--seed`` is the first). Per strategy: the median over seeds of the
share of the reward-best tool in the last 500 rounds, and of the cumulative pseudo-regret (the sum
over rounds of the best expected reward minus the chosen tool's). Acceptance (the issue's):
Thompson's share >= 90%, UCB1's >= 80%, regret Thompson < UCB1 < epsilon-greedy < uniform, and two
runs with the same seed make identical choices. A second horizon (20,000 rounds, 5 seeds) shows
where the regret order of UCB1 and epsilon-greedy settles. Writes bench/results/bandit.json and the
plot bench/results/bandit_regret.png (matplotlib, in the bench extra).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolplan.execute import ChoiceOutcome, ChoiceRequest
from toolplan.policy import RewardWeights, ToolPolicy

from . import common


@dataclass(frozen=True)
class Arm:
    name: str
    success: float
    latency: float  # seconds
    cost: float


ARMS = (
    Arm("reliable", 0.95, 0.300, 1.0),
    Arm("quick", 0.80, 0.100, 2.0),
    Arm("cheap", 0.60, 0.050, 0.5),
)
GROUP = "search"
LATENCY_SCALE = 1.0  # seconds: the simulated run's deadline, which rewards are relative to
COST_SCALE = max(a.cost for a in ARMS)  # no max_cost: the dearest alternative (what a run passes)
ROUNDS, SEEDS, LAST = 2_000, 20, 500
LONG_ROUNDS, LONG_SEEDS = 20_000, 5
QUICK_ROUNDS, QUICK_SEEDS = 400, 4
STRATEGIES = ("thompson", "ucb1", "epsilon_greedy", "uniform")
TARGET_SHARE = {"thompson": 0.90, "ucb1": 0.80}
WEIGHTS = RewardWeights()


def expected_reward(arm: Arm) -> float:
    return arm.success * (1.0 - WEIGHTS.latency * arm.latency / LATENCY_SCALE - WEIGHTS.cost * arm.cost / COST_SCALE)


MEANS = {a.name: expected_reward(a) for a in ARMS}
BEST = max(MEANS, key=MEANS.__getitem__)


async def simulate(strategy: str, seed: int, rounds: int) -> tuple[list[str], list[float]]:
    """The tools chosen in each round and the cumulative pseudo-regret after each."""
    env = random.Random(f"bandit-environment-{seed}")
    clock = [1_000_000.0]
    policy = ToolPolicy(
        "thompson" if strategy == "uniform" else strategy,  # type: ignore[arg-type]
        seed=seed,
        prefer_general_methods="never",
        clock=lambda: clock[0],
    )
    uniform = random.Random(seed)
    names = tuple(a.name for a in ARMS)
    by_name = {a.name: a for a in ARMS}
    chosen: list[str] = []
    regret: list[float] = []
    total = 0.0
    for _ in range(rounds):
        request = ChoiceRequest(group=GROUP, candidates=names)
        if strategy == "uniform":
            name = names[uniform.randrange(len(names))]
        else:
            choice = await policy.choose(request)
            name = choice.chosen
        arm = by_name[name]
        latency = arm.latency * env.uniform(0.8, 1.2)
        ok = env.random() < arm.success
        clock[0] += latency
        if strategy != "uniform":
            await policy.observe(
                choice,
                ChoiceOutcome(
                    ok=ok, latency=latency, cost=arm.cost, latency_scale=LATENCY_SCALE, cost_scale=COST_SCALE
                ),
            )
        total += MEANS[BEST] - MEANS[name]
        chosen.append(name)
        regret.append(total)
    return chosen, regret


def median_curve(curves: list[list[float]]) -> list[float]:
    return [statistics.median(points) for points in zip(*curves, strict=True)]


async def horizon(rounds: int, seeds: list[int], strategies: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for strategy in strategies:
        t0 = time.perf_counter()
        shares, regrets, curves = [], [], []
        for seed in seeds:
            chosen, regret = await simulate(strategy, seed, rounds)
            last = chosen[-LAST:]
            shares.append(last.count(BEST) / len(last))
            regrets.append(regret[-1])
            curves.append(regret)
        out[strategy] = {
            "share_best_last": common.summarize(shares),
            "regret": common.summarize(regrets),
            "median_curve": [round(x, 3) for x in median_curve(curves)],
            "seconds": round(time.perf_counter() - t0, 2),
        }
        common.log(
            f"bandit {rounds} rounds {strategy}: share {statistics.median(shares):.3f}, "
            f"regret {statistics.median(regrets):.1f}"
        )
    return out


def plot(results: dict[str, Any], path: Path) -> str | None:
    """The median regret curves as a PNG; the reason when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"matplotlib is not installed ({common.INSTALL_HINT})"
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    labels = {"thompson": "Thompson", "ucb1": "UCB1", "epsilon_greedy": "epsilon-greedy (0.1)", "uniform": "uniform"}
    for strategy, data in results.items():
        curve = data["median_curve"]
        ax.plot(range(1, len(curve) + 1), curve, label=labels.get(strategy, strategy))
    ax.set_xlabel("round")
    ax.set_ylabel("cumulative pseudo-regret (median of seeds)")
    ax.set_title("toolplan.policy: three alternative tools, 2,000 rounds")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return None


def acceptance(results: dict[str, Any], repeat_identical: dict[str, bool]) -> dict[str, Any]:
    share = {s: results[s]["share_best_last"]["median"] for s in results}
    regret = {s: results[s]["regret"]["median"] for s in results}
    order = sorted(regret, key=regret.__getitem__)
    return {
        "thompson_share_ge_0.90": share["thompson"] >= TARGET_SHARE["thompson"],
        "ucb1_share_ge_0.80": share["ucb1"] >= TARGET_SHARE["ucb1"],
        "regret_order": order,
        "regret_thompson_lt_ucb1": regret["thompson"] < regret["ucb1"],
        "regret_ucb1_lt_epsilon_greedy": regret["ucb1"] < regret["epsilon_greedy"],
        "regret_epsilon_greedy_lt_uniform": regret["epsilon_greedy"] < regret["uniform"],
        "same_seed_same_choices": all(repeat_identical.values()),
    }


async def run(first_seed: int, quick: bool) -> dict[str, Any]:
    rounds, seeds = (QUICK_ROUNDS, QUICK_SEEDS) if quick else (ROUNDS, SEEDS)
    seed_list = list(range(first_seed, first_seed + seeds))
    results = await horizon(rounds, seed_list, STRATEGIES)
    repeat = {}
    for strategy in STRATEGIES:
        a, _ = await simulate(strategy, first_seed, rounds)
        b, _ = await simulate(strategy, first_seed, rounds)
        repeat[strategy] = a == b
    data: dict[str, Any] = {"rounds": rounds, "seeds": seed_list, "results": results, "repeat_identical": repeat}
    data["acceptance"] = acceptance(results, repeat)
    if not quick:
        long_seeds = list(range(first_seed, first_seed + LONG_SEEDS))
        long = await horizon(LONG_ROUNDS, long_seeds, ("ucb1", "epsilon_greedy"))
        for item in long.values():
            item.pop("median_curve")
        data["long_horizon"] = {"rounds": LONG_ROUNDS, "seeds": long_seeds, "results": long}
    return data


def main(args: Any, argv: list[str]) -> Path:
    data = common.header(
        "bandit",
        quick=args.quick,
        argv=argv,
        arms=[vars(a) | {"expected_reward": round(MEANS[a.name], 4)} for a in ARMS],
        best=BEST,
        reward="RewardWeights() defaults: 0 on failure, else 1 - 0.2*latency/1s - 0.2*cost/2.0",
        last_rounds=LAST,
        epsilon=0.1,
        half_life="ToolPolicy default (7 days of simulated time: no visible decay)",
    )
    data.update(asyncio.run(run(args.seed, args.quick)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "bandit_regret.png"
    missing = plot(data["results"], png)
    data["plot"] = missing or png.name
    return common.write("bandit", data, out)
