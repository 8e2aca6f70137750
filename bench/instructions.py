"""Benchmark 1b: executed instructions per step, counted by valgrind's cachegrind (deterministic).

Wall times on small shared machines move by 20-50% between runs; instruction counts do not. For
each shape and size this runs ``bench._icount`` under ``valgrind --tool=cachegrind --cache-sim=no``
with K=0 and K runs of a phase and reports ``(I(K) - I(0)) / (K * n)``: instructions per step of
the floor, of ``compile_plan`` alone and of toolplan's whole run (``prepare`` + ``execute_compiled``).
Instructions are not time (cache misses, allocation and the garbage collector are not weighted),
so this complements the timed table rather than replacing it. Needs ``valgrind`` (``apt install
valgrind``); without it the benchmark records that it was skipped. ``--quick`` skips it too: each
count starts Python under cachegrind, and the quick suite must stay within its minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import common
from ._icount import PHASES
from ._ops import ASYNC_OPERATIONS, DIVISOR, OPERATIONS
from .dags import SHAPES

SIZES = (10, 100, 1_000)
QUICK_SIZES = (10,)
QUICK_SKIP = "--quick (counting under cachegrind takes minutes: run `python -m bench instructions`)"
_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")
ROOT = Path(__file__).resolve().parent.parent


def _instructions(module: str, *args: object) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONHASHSEED": "0",  # the same dict and set layouts in every run
    }
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-m",
            module,
            *map(str, args),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    m = _IREFS.search(proc.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def _runs(n: int, quick: bool) -> int:
    """Runs per measurement: at least 3,000 steps (300 quick), so start-up jitter is a rounding error."""
    return max(3, (300 if quick else 3_000) // n)


def _per_step(shape: str, n: int, phase: str, k: int) -> float:
    return (_instructions("bench._icount", shape, n, phase, k) - _instructions("bench._icount", shape, n, phase, 0)) / (
        k * n
    )


def _operation(name: str, k: int) -> float:
    return (_instructions("bench._ops", name, k) - _instructions("bench._ops", name, 0)) / k / DIVISOR.get(name, 1)


def operations() -> list[dict[str, Any]]:
    """Instructions of single operations of a step (see `bench._ops`).

    5,000 repetitions, with ``--quick`` too: start-up varies by a few hundred thousand instructions,
    which 500 repetitions of a 500-instruction function call do not outweigh.
    """
    k = 5_000
    described = {name: d for name, (d, _) in {**OPERATIONS, **ASYNC_OPERATIONS}.items()}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(described, pool.map(lambda name: _operation(name, k), described), strict=True))
    return [{"operation": n, "what": described[n], "instructions": round(counts[n])} for n in described]


def run(*, sizes: tuple[int, ...], quick: bool) -> list[dict[str, Any]]:
    jobs = [(shape, n, phase) for n in sizes for shape in SHAPES for phase in PHASES]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # one valgrind per core
        counts = dict(
            zip(jobs, pool.map(lambda job: _per_step(job[0], job[1], job[2], _runs(job[1], quick)), jobs), strict=True)
        )
    cases: list[dict[str, Any]] = []
    for n in sizes:
        for shape in SHAPES:
            floor, compile_, total = (counts[(shape, n, p)] for p in PHASES)
            row = {
                "shape": shape,
                "n": n,
                "instructions_per_step": {
                    "floor": round(floor),
                    "toolplan_compile_plan": round(compile_),
                    "toolplan_run": round(total - compile_),
                    "toolplan": round(total),
                },
                "ratio_toolplan_to_floor": total / floor,
                "ratio_toolplan_run_to_floor": (total - compile_) / floor,
            }
            common.log(
                f"instructions {shape:7} n={n:<6} floor={floor:,.0f} compile={compile_:,.0f} "
                f"toolplan={total:,.0f} per step"
            )
            cases.append(row)
    return cases


def main(args: Any, argv: list[str]) -> Path:
    sizes = tuple(args.sizes) if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    data = common.header(
        "instructions",
        quick=args.quick,
        argv=argv,
        counter="valgrind --tool=cachegrind --cache-sim=no: 'I refs' (instructions executed)",
        method="(I(K runs) - I(0 runs)) / (K * steps), K = max(3, 3000 // steps) (300 with --quick), "
        "after one warm-up run of every phase, PYTHONHASHSEED=0",
        toolplan_run="toolplan (prepare + execute_compiled) minus compile_plan: execution, the invoker and records",
    )
    if args.quick:
        common.log(f"instructions: skipped ({QUICK_SKIP})")
        data.update(skipped=QUICK_SKIP, cases=[], operations=[])
    elif shutil.which("valgrind") is None:
        common.log("instructions: valgrind not found (apt install valgrind); skipped")
        data.update(skipped="valgrind not found (apt install valgrind)", cases=[], operations=[])
    else:
        data.update(cases=run(sizes=sizes, quick=args.quick), operations=operations())
    return common.write("instructions", data, Path(args.out))
