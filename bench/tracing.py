"""Benchmark 1c: what OpenTelemetry tracing costs per step, in instructions (valgrind's cachegrind).

For each shape it counts toolplan's whole run per step (``prepare`` + ``execute_compiled``, as
`bench.instructions`) with tracing off and on. On: every run is traced into the OpenTelemetry SDK
with a `SimpleSpanProcessor` whose exporter drops the spans, so the figure is toolplan's spans plus
the SDK's recording of them, without an exporter's own work. Off is the engine as everyone runs it:
toolplan makes no span, not even a no-op one. With ``TOOLPLAN_BASELINE_SRC`` set to the ``src``
folder of another checkout (e.g. the commit before tracing existed), the off count is also taken
with that tree first on the path, to show that tracing adds nothing when off. ``--quick`` skips it.
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
from ._icount import TRACED

SHAPES = ("chain", "fanout")
N = 100
K = 20  # runs per count: 2,000 steps


def _instructions(src: str | None, *args: object) -> int:
    """`bench.instructions._instructions`, with ``src`` (another tree's toolplan) first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(icount.ROOT), src, os.environ.get("PYTHONPATH")])),
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


def _per_step(shape: str, phase: str, src: str | None) -> float:
    return (_instructions(src, shape, N, phase, K) - _instructions(src, shape, N, phase, 0)) / (K * N)


def run() -> list[dict[str, Any]]:
    baseline = os.environ.get("TOOLPLAN_BASELINE_SRC") or None
    jobs: list[tuple[str, str, str | None]] = [
        (shape, phase, None) for shape in SHAPES for phase in ("toolplan", TRACED)
    ]
    if baseline is not None:
        jobs += [(shape, "toolplan", baseline) for shape in SHAPES]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _per_step(*job), jobs), strict=True))
    rows = []
    for shape in SHAPES:
        off, on = counts[(shape, "toolplan", None)], counts[(shape, TRACED, None)]
        row: dict[str, Any] = {
            "shape": shape,
            "n": N,
            "off": round(off),
            "on": round(on),
            "tracing_per_step": round(on - off),
        }
        if baseline is not None:
            before = counts[(shape, "toolplan", baseline)]
            row["before_tracing"] = round(before)
            row["off_change_pct"] = round(100 * (off - before) / before, 2)
        common.log(f"tracing {shape:7} n={N} off={off:,.0f} on={on:,.0f} per step")
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
        data.update(cases=run(), baseline_src=os.environ.get("TOOLPLAN_BASELINE_SRC") or None)
    return common.write("tracing", data, Path(args.out))
