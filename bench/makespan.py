"""Benchmark 2: makespan vs critical path on random DAGs with heavy-tailed tool latencies.

Each step sleeps for its own seeded latency (log-normal, median 30 ms, sigma 1.0, clipped to
5-500 ms). The critical path is computed from those exact sleep durations, so
``wall / critical_path`` is the scheduling loss (1.0 = perfect; sleep overshoot and engine overhead
make it slightly more). With a per-tool concurrency limit the critical path is no longer reachable;
the reference is then the lower bound ``max(critical_path, work(limited tool) / limit)``.
"""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

from toolplan import tool
from toolplan.execute import DEFAULT_MAX_CONCURRENCY, execute_compiled, prepare

from . import common
from .dags import Dag, critical_path, depth, random_dag, to_plan
from .executors import floor_run, langgraph_build, langgraph_run, wave_run

SIZES = (50, 200, 500)
QUICK_SIZES = (50,)
MEDIAN_LATENCY = 0.030
SIGMA = 1.0
CLIP = (0.005, 0.5)
LIMITED_SHARE = 0.4  # share of steps that call the concurrency-limited tool
TOOL_LIMIT = 3
CONTENDERS = ("toolplan", "toolplan_default_mc", "floor", "wave", "langgraph")


@tool
async def compute(deps: list[float], delay: float) -> float:
    """Sleep ``delay`` seconds (an I/O-bound tool with known latency)."""
    await asyncio.sleep(delay)
    return delay


@tool(concurrency=TOOL_LIMIT)
async def search(deps: list[float], delay: float) -> float:
    """Like compute, but at most TOOL_LIMIT calls run at once (a rate-limited API)."""
    await asyncio.sleep(delay)
    return delay


def latencies(dag: Dag, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    lo, hi = CLIP
    return {s: min(hi, max(lo, rng.lognormvariate(math.log(MEDIAN_LATENCY), SIGMA))) for s in dag}


class Case:
    def __init__(self, n: int, *, limited: bool, seed: int) -> None:
        self.n, self.limited = n, limited
        self.dag = random_dag(n, seed=seed)
        self.delay = latencies(self.dag, seed)
        rng = random.Random(seed + 1)
        self.tool = {s: ("search" if limited and rng.random() < LIMITED_SHARE else "compute") for s in self.dag}
        self.plan = to_plan(self.dag, tool=self.tool, extra={s: {"delay": d} for s, d in self.delay.items()})
        self.cp = critical_path(self.dag, self.delay)
        self.work = sum(self.delay.values())
        self.limited_work = sum(d for s, d in self.delay.items() if self.tool[s] == "search")
        self.bound = max(self.cp, self.limited_work / TOOL_LIMIT) if limited else self.cp

    def bound_for(self, contender: str) -> float:
        """The lower bound each contender is measured against (a plan-wide limit adds work / limit)."""
        if contender == "toolplan_default_mc":
            return max(self.bound, self.work / DEFAULT_MAX_CONCURRENCY)
        return self.bound

    async def _fn(self, s: str, values: list[Any], sems: dict[str, asyncio.Semaphore]) -> float:
        sem = sems.get(self.tool[s])
        if sem is None:
            await asyncio.sleep(self.delay[s])
        else:
            async with sem:
                await asyncio.sleep(self.delay[s])
        return self.delay[s]

    def _sems(self) -> dict[str, asyncio.Semaphore]:
        return {"search": asyncio.Semaphore(TOOL_LIMIT)} if self.limited else {}

    async def run(self, contender: str) -> float:
        """Wall seconds for one run (graph building excluded: only execution is timed)."""
        sems = self._sems()

        async def fn(s: str, values: list[Any]) -> float:
            return await self._fn(s, values, sems)

        if contender.startswith("toolplan"):
            compiled, invoker = prepare(self.plan, [compute, search], max_steps=self.n)
            mc = self.n if contender == "toolplan" else DEFAULT_MAX_CONCURRENCY
            t0 = common.now()
            result = await execute_compiled(compiled, invoker, max_concurrency=mc)
            t = common.now() - t0
            assert result.ok, result.errors
            return t
        if contender == "langgraph":
            graph = langgraph_build(self.dag, fn)
            t0 = common.now()
            await langgraph_run(graph, self.dag)
            return common.now() - t0
        runner = floor_run if contender == "floor" else wave_run
        t0 = common.now()
        await runner(self.dag, fn)
        return common.now() - t0


async def run(*, quick: bool, reps: int | None, seed: int) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    nreps = 1 if quick else (reps or 3)
    rows: list[dict[str, Any]] = []
    missing = common.not_installed(CONTENDERS)
    contenders = [c for c in CONTENDERS if c not in missing]
    for limited in (False, True):
        for n in sizes:
            case = Case(n, limited=limited, seed=seed + n)
            walls: dict[str, list[float]] = {c: [] for c in contenders}
            for r in range(nreps):
                for c in common.rotate(contenders, r):
                    common.settle()
                    walls[c].append(await case.run(c))
            ratios = {c: common.median(w) / case.bound_for(c) for c, w in walls.items()}
            rows.append(
                {
                    "case": "tool_limit" if limited else "unlimited",
                    "n": n,
                    "depth": depth(case.dag),
                    "critical_path_s": case.cp,
                    "total_work_s": case.work,
                    "limited_tool_work_s": case.limited_work,
                    "reference": "max(critical_path, limited_work / limit)" if limited else "critical_path",
                    "reference_s": case.bound,
                    "reference_s_by_contender": {c: case.bound_for(c) for c in contenders},
                    "wall_s": {c: common.summarize(w) for c, w in walls.items()},
                    "ratio_to_reference": ratios,
                }
            )
            common.log(
                f"makespan {rows[-1]['case']:10} n={n:<4} ref={case.bound:.3f}s "
                + " ".join(f"{c}={x:.3f}" for c, x in ratios.items())
            )
    return {"cases": rows, "not_installed": missing}


def main(args: Any, argv: list[str]) -> Path:
    data = common.header(
        "makespan",
        quick=args.quick,
        argv=argv,
        seed=args.seed,
        latency=f"log-normal, median {MEDIAN_LATENCY * 1000:g} ms, sigma {SIGMA}, clipped to "
        f"{CLIP[0] * 1000:g}-{CLIP[1] * 1000:g} ms",
        dag="random DAG, in-degree <= 3, parents from a window of max(8, 2*sqrt(n)) previous steps",
        tool_limit=f"in the tool_limit case {LIMITED_SHARE:.0%} of steps call 'search' with @tool(concurrency="
        f"{TOOL_LIMIT}); the other executors get an asyncio.Semaphore({TOOL_LIMIT}) around those steps",
        toolplan_max_concurrency="n (unbounded) for 'toolplan'; 20 (the default) for 'toolplan_default_mc', "
        "whose reference also includes total_work / 20",
        timed="execution only (plan compile / graph build excluded)",
    )
    data.update(asyncio.run(run(quick=args.quick, reps=args.reps, seed=args.seed)))
    return common.write("makespan", data, Path(args.out))
