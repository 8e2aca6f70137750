"""Benchmark 1: engine overhead per step with no-op tools, and peak memory.

Every contender runs the same DAG whose steps do nothing (an ``async def`` returning 1; Dask gets
the sync equivalent). Time per step = wall time of one run / number of steps. Small plans are run
``inner`` times back to back per sample so each sample lasts milliseconds, not microseconds.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolplan import tool
from toolplan.execute import DEFAULT_MAX_CONCURRENCY, execute_compiled, prepare
from toolplan.plan import compile_plan

from . import common
from .dags import SHAPES, Dag, Shape, depth, make, sinks, to_plan
from .executors import dask_graph, dask_run, floor_run, langgraph_build, langgraph_run, wave_run

SIZES = (10, 100, 1_000, 10_000)
QUICK_SIZES = (10, 100)
LANGGRAPH_MAX = 10_000  # lowered by --langgraph-max if a machine cannot afford it
PAIRS = 15  # back-to-back toolplan / floor pairs per case (see _paired)
CONTENDERS = ("toolplan", "toolplan_default_mc", "floor", "wave", "langgraph", "dask")


@tool
async def noop(deps: list[int]) -> int:
    """Do nothing."""
    return 1


async def _noop_fn(step: str, values: list[Any]) -> int:
    return 1


def _noop_sync(values: list[Any]) -> int:
    return 1


def inner_runs(n: int, *, quick: bool = False) -> int:
    return max(1, (200 if quick else 1_000) // n)


class Case:
    """One (shape, size): the DAG, its plan and the per-contender runners, each returning phase timings."""

    def __init__(self, shape: Shape, n: int, *, seed: int) -> None:
        self.shape, self.n = shape, n
        self.dag: Dag = make(shape, n, seed=seed)
        self.plan = to_plan(self.dag)
        self.keys = sinks(self.dag)

    async def toolplan(self, max_concurrency: int) -> dict[str, float]:
        t0 = common.now()
        compiled, invoker = prepare(self.plan, [noop], max_steps=self.n)
        t1 = common.now()
        result = await execute_compiled(compiled, invoker, max_concurrency=max_concurrency)
        t2 = common.now()
        assert result.ok, result.errors
        return {"build": t1 - t0, "run": t2 - t1, "total": t2 - t0}

    async def floor(self) -> dict[str, float]:
        t0 = common.now()
        await floor_run(self.dag, _noop_fn)
        return {"run": common.now() - t0, "total": common.now() - t0}

    async def wave(self) -> dict[str, float]:
        t0 = common.now()
        await wave_run(self.dag, _noop_fn)
        t = common.now() - t0
        return {"run": t, "total": t}

    async def langgraph(self) -> dict[str, float]:
        t0 = common.now()
        graph = langgraph_build(self.dag, _noop_fn)
        t1 = common.now()
        out = await langgraph_run(graph, self.dag)
        t2 = common.now()
        assert out == [1] * len(self.keys)
        return {"build": t1 - t0, "run": t2 - t1, "total": t2 - t0}

    async def dask(self) -> dict[str, float]:
        t0 = common.now()
        dsk = dask_graph(self.dag, _noop_sync)
        t1 = common.now()
        dask_run(dsk, self.keys)
        t2 = common.now()
        return {"build": t1 - t0, "run": t2 - t1, "total": t2 - t0}

    def runner(self, name: str) -> Callable[[], Awaitable[dict[str, float]]]:
        if name == "toolplan":
            return lambda: self.toolplan(self.n)
        if name == "toolplan_default_mc":
            return lambda: self.toolplan(DEFAULT_MAX_CONCURRENCY)
        return {"floor": self.floor, "wave": self.wave, "langgraph": self.langgraph, "dask": self.dask}[name]


async def _timed(case: Case, name: str, inner: int, *, gc_off: bool = False) -> dict[str, float]:
    run = case.runner(name)
    common.settle()
    totals: dict[str, float] = {}
    if gc_off:
        gc.disable()
    try:
        for _ in range(inner):
            for phase, t in (await run()).items():
                totals[phase] = totals.get(phase, 0.0) + t
    finally:
        gc.enable()
    return {phase: t / inner / case.n * 1e6 for phase, t in totals.items()}  # µs per step


async def _peak_memory(case: Case, name: str) -> int:
    run = case.runner(name)
    common.settle()
    tracemalloc.start()
    try:
        await run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


async def _paired(case: Case, inner: int, pairs: int, *, gc_off: bool = False) -> dict[str, list[float]]:
    """toolplan over the floor, measured back to back: ``pairs`` ratios of adjacent samples.

    This VM switches between a fast and a slow speed every fraction of a second (`speed_probe`
    measures it); two samples taken back to back almost always share one speed, while the medians
    of the interleaved samples above may each come from a different one. The order alternates.
    ``gc_off``: the garbage collector is disabled while each sample runs (to show what it costs).
    """
    whole: list[float] = []
    run: list[float] = []
    for i in range(pairs):
        got: dict[str, dict[str, float]] = {}
        for name in ("toolplan", "floor") if i % 2 == 0 else ("floor", "toolplan"):
            got[name] = await _timed(case, name, inner, gc_off=gc_off)
        whole.append(got["toolplan"]["total"] / got["floor"]["total"])
        run.append(got["toolplan"]["run"] / got["floor"]["total"])
    return {"total": whole, "run": run}


GC_RUNS = 3  # watched runs per contender and case (see _gc_cost)


async def _gc_cost(case: Case, name: str) -> dict[str, Any]:
    """What the garbage collector does during one run, ``GC_RUNS`` times after a full collection.

    Collections per generation (the largest count seen) and milliseconds spent in them (the median).
    A full collection (generation 2) walks the whole process heap; CPython 3.11 starts one at the 11th
    collection of generation 1 since the last one, if the objects that reached the oldest generation
    since then exceed a quarter of those already there (docs/benchmarks.md, "Garbage collection").
    """
    run = case.runner(name)
    counts = [0, 0, 0]
    seen = [0, 0, 0]  # this run's collections per generation
    spent: list[float] = []
    clock = [0.0, 0.0]  # start of the current collection, time in collections this run

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            clock[0] = common.now()
            return
        clock[1] += common.now() - clock[0]
        seen[info["generation"]] += 1

    gc.callbacks.append(watch)
    try:
        for _ in range(GC_RUNS):
            common.settle()
            seen[:] = [0, 0, 0]
            clock[1] = 0.0
            await run()
            counts = [max(a, b) for a, b in zip(counts, seen, strict=True)]
            spent.append(clock[1] * 1e3)
    finally:
        gc.callbacks.remove(watch)
    return {"collections": counts, "ms": common.summarize(spent)}


def speed_probe(samples: int) -> list[float]:
    """Milliseconds for one fixed pure-Python loop, ``samples`` times: how much this machine's speed moves."""
    out: list[float] = []
    for _ in range(samples):
        t0 = common.now()
        acc = 0
        for i in range(300_000):
            acc += i
        out.append((common.now() - t0) * 1e3)
    return out


async def _compile_only(case: Case, inner: int, reps: int) -> list[float]:
    """validate + parse + compile (``compile_plan``) alone, µs per step."""
    samples: list[float] = []
    for _ in range(reps):
        common.settle()
        t0 = common.now()
        for _ in range(inner):
            compile_plan(case.plan, [noop], max_steps=case.n)
        samples.append((common.now() - t0) / inner / case.n * 1e6)
    return samples


async def run(
    *, quick: bool, reps: int | None, sizes: tuple[int, ...] | None, langgraph_max: int, seed: int
) -> dict[str, Any]:
    sizes = sizes or (QUICK_SIZES if quick else SIZES)

    def reps_for(n: int) -> int:
        return 2 if quick else reps or (3 if n >= 1_000 else 5)

    cases: list[dict[str, Any]] = []
    probe: list[float] = []  # the machine's speed, probed before each case's pairs
    missing = common.not_installed(CONTENDERS)
    for n in sizes:
        for shape in SHAPES:
            case = Case(shape, n, seed=seed)
            contenders = [c for c in CONTENDERS if c not in missing and (c != "langgraph" or n <= langgraph_max)]
            inner = inner_runs(n, quick=quick)
            samples: dict[str, dict[str, list[float]]] = {c: {} for c in contenders}
            for _ in range(1 if n < 10_000 else 0):  # warm-up (imports, caches) outside the samples
                for c in contenders:
                    await case.runner(c)()
            for r in range(reps_for(n)):
                for c in common.rotate(contenders, r):
                    for phase, us in (await _timed(case, c, inner)).items():
                        samples[c].setdefault(phase, []).append(us)
            probe += speed_probe(5)
            pairs = 2 if quick else PAIRS
            paired = await _paired(case, inner, pairs)
            paired_gc_off = await _paired(case, inner, pairs, gc_off=True)
            memory = {c: await _peak_memory(case, c) for c in contenders}
            compile_samples = await _compile_only(case, inner, reps_for(n))
            gc_cost = {c: await _gc_cost(case, c) for c in ("toolplan", "floor")}
            row: dict[str, Any] = {
                "shape": shape,
                "n": n,
                "depth": depth(case.dag),
                "edges": sum(len(d) for d in case.dag.values()),
                "inner_runs": inner,
                "us_per_step": {c: {p: common.summarize(v) for p, v in ph.items()} for c, ph in samples.items()},
                "peak_memory_bytes": memory,
                "compile_plan_us_per_step": common.summarize(compile_samples),
                "gc_per_run": gc_cost,
                "skipped": [c for c in CONTENDERS if c not in contenders and c not in missing],  # too slow
            }
            tp = row["us_per_step"]["toolplan"]["total"]["median"]
            fl = row["us_per_step"]["floor"]["total"]["median"]
            row["ratio_toolplan_to_floor"] = tp / fl
            row["paired_ratio_toolplan_to_floor"] = {p: common.summarize(v) for p, v in paired.items()}
            row["paired_ratio_gc_off"] = {p: common.summarize(v) for p, v in paired_gc_off.items()}
            if "langgraph" in contenders:
                row["ratio_langgraph_to_toolplan"] = row["us_per_step"]["langgraph"]["total"]["median"] / tp
            common.log(
                f"overhead {shape:7} n={n:<6} "
                + " ".join(f"{c}={row['us_per_step'][c]['total']['median']:.1f}" for c in contenders)
                + " µs/step"
            )
            cases.append(row)
    return {
        "cases": cases,
        "growth": _growth(cases),
        "speed_probe_ms": common.summarize(probe),
        "not_installed": missing,
    }


def _growth(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-step cost at the largest size divided by that at the smallest (1.0 = perfectly linear)."""
    out: dict[str, Any] = {}
    sizes = sorted({c["n"] for c in cases})
    if len(sizes) < 2:
        return out
    lo, hi = sizes[0], sizes[-1]
    for shape in SHAPES:
        a = next((c for c in cases if c["shape"] == shape and c["n"] == lo), None)
        b = next((c for c in cases if c["shape"] == shape and c["n"] == hi), None)
        if a is None or b is None:
            continue
        ratios: dict[str, float] = {}
        for name in b["us_per_step"]:
            if name in a["us_per_step"]:
                ratios[name] = b["us_per_step"][name]["total"]["median"] / a["us_per_step"][name]["total"]["median"]
        ratios["compile_plan"] = b["compile_plan_us_per_step"]["median"] / a["compile_plan_us_per_step"]["median"]
        out[shape] = {"from": lo, "to": hi, "per_step_cost_ratio": ratios}
    return out


def main(args: Any, argv: list[str]) -> Path:
    data = common.header(
        "overhead",
        quick=args.quick,
        argv=argv,
        seed=args.seed,
        toolplan_max_concurrency="n (the plan size: never the bottleneck for no-op tools)",
        toolplan_default_max_concurrency=DEFAULT_MAX_CONCURRENCY,
        langgraph_max_steps=args.langgraph_max,
        dask_scheduler="dask.threaded.get, default num_workers (= cpu count), sync no-op function",
        unit="microseconds per step (wall time of one plan run / steps), median of repetitions",
    )
    data.update(
        asyncio.run(
            run(
                quick=args.quick,
                reps=args.reps,
                sizes=tuple(args.sizes) if args.sizes else None,
                langgraph_max=args.langgraph_max,
                seed=args.seed,
            )
        )
    )
    return common.write("overhead", data, Path(args.out))
