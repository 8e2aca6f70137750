"""Benchmark 1c: what OpenTelemetry tracing costs per step, in instructions (valgrind's cachegrind).

For each shape it counts toolplan's whole run per step (``prepare`` + ``execute_compiled``, as
`bench.instructions`), always the same code, four ways:

- ``off``: the engine as everyone runs it: tracing is not configured, toolplan makes no span, not
  even a no-op one (the run asks once whether it is traced, and is told no);
- ``unhooked``: the same, with that one question taken out (the engine's ``get_tracer`` replaced by
  a builtin that returns None): the engine without its tracing hook. ``off - unhooked`` is what the
  hook costs when tracing is off (the goal: < 0.5% of a step);
- ``noop``: traced into OpenTelemetry's no-op provider: toolplan's span code runs, nothing records;
- ``on``: traced into the OpenTelemetry SDK with a `SimpleSpanProcessor` whose exporter drops the
  spans: toolplan's spans plus the SDK's recording of them, without an exporter's own work;
- ``store_unhooked``: "off" with the durable store's questions taken out (a run without a store asks
  per step whether it has one; `bench._unhook` recompiles the engine with each answer folded in):
  ``off - store_unhooked`` is what the store's hook costs a run that has no store (the same goal).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import common
from . import instructions as icount
from ._icount import STORE_UNHOOKED, TRACED, TRACED_NOOP, UNHOOKED

SHAPES = ("chain", "fanout")
N = 100
K = 20  # runs per count: 2,000 steps
PHASES = {"off": "toolplan", "unhooked": UNHOOKED, "noop": TRACED_NOOP, "on": TRACED, "store_unhooked": STORE_UNHOOKED}
OFF_TARGET_PCT = 0.5  # what tracing, or the durable store, may cost a step when it is off


def _instructions(*args: object) -> int:
    """`bench.instructions._instructions` of ``bench._icount`` with ``args``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(icount.ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONHASHSEED": "0",
    }
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    proc = subprocess.run(
        [*valgrind, sys.executable, "-m", "bench._icount", *map(str, args)],
        cwd=icount.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    m = icount._IREFS.search(proc.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def _per_step(shape: str, phase: str) -> float:
    return (_instructions(shape, N, phase, K) - _instructions(shape, N, phase, 0)) / (K * N)


def run() -> list[dict[str, Any]]:
    jobs = [(shape, phase) for shape in SHAPES for phase in PHASES.values()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _per_step(*job), jobs), strict=True))
    rows = []
    for shape in SHAPES:
        c = {name: counts[(shape, phase)] for name, phase in PHASES.items()}
        row: dict[str, Any] = {
            "shape": shape,
            "n": N,
            **{name: round(v) for name, v in c.items()},
            "tracing_per_step": round(c["on"] - c["off"]),
            "noop_per_step": round(c["noop"] - c["off"]),
            "off_cost_per_step": round(c["off"] - c["unhooked"]),
            "off_cost_pct": round(100 * (c["off"] - c["unhooked"]) / c["unhooked"], 2),
            "store_off_cost_per_step": round(c["off"] - c["store_unhooked"]),
            "store_off_cost_pct": round(100 * (c["off"] - c["store_unhooked"]) / c["store_unhooked"], 2),
        }
        common.log(
            f"tracing {shape:7} n={N} unhooked={c['unhooked']:,.0f} off={c['off']:,.0f} "
            f"noop={c['noop']:,.0f} on={c['on']:,.0f} store_unhooked={c['store_unhooked']:,.0f} per step"
        )
        rows.append(row)
    return rows


def main(args: Any, argv: list[str]) -> Path:
    data = common.header(
        "tracing",
        quick=args.quick,
        argv=argv,
        counter="valgrind --tool=cachegrind --cache-sim=no: 'I refs' (instructions executed)",
        method=f"(I({K} runs) - I(0 runs)) / ({K} * {N} steps), PYTHONHASHSEED=0, as bench.instructions",
        traced="OpenTelemetry SDK TracerProvider + SimpleSpanProcessor, exporter that drops the spans",
        noop="configure_tracing(tracer_provider=opentelemetry.trace.NoOpTracerProvider())",
        unhooked="the same run with toolplan.execute._run.get_tracer replaced by NoneType (the hook taken out)",
        store_unhooked="the same run with the engine's store questions (x.journal / x.stored / store is [not] None) "
        "folded to a run without a store's answers and compiled away (bench/_unhook.py)",
        off_target_pct=OFF_TARGET_PCT,
    )
    if args.quick:
        common.log(f"tracing: skipped ({icount.QUICK_SKIP})")
        data.update(skipped=icount.QUICK_SKIP, cases=[])
    elif shutil.which("valgrind") is None:
        data.update(skipped="valgrind not found (apt install valgrind)", cases=[])
    elif importlib.util.find_spec("opentelemetry.sdk") is None:
        common.log("tracing: the OpenTelemetry SDK is not installed; skipped")
        data.update(skipped='the OpenTelemetry SDK is not installed (pip install "toolplan[tracing]")', cases=[])
    else:
        data.update(cases=run())
    return common.write("tracing", data, Path(args.out))
