"""``python -m bench NAME|all|report [--quick] [--out DIR]``; NAME is one of ``BENCHMARKS``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import common

BENCHMARKS = (
    "overhead",
    "instructions",
    "tracing",
    "makespan",
    "roundtrips",
    "local_model",
    "streaming",
    "durable",
    "mcp",
    "mcp_tasks",
    "service",
    "replicas",
    "planner",
    "bandit",
    "ray",
    "knowledge",
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("benchmark", choices=[*BENCHMARKS, "all", "report"], help="which benchmark to run")
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and few repetitions, no instructions, local_model or planner (< 1 minute on 2 idle cores)",
    )
    p.add_argument("--out", default=str(common.RESULTS_DIR), help="results directory (default bench/results)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per contender (default per benchmark)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random DAGs and latencies")
    p.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        help="overhead, instructions, durable: plan sizes (default 10 100 1000 10000; 10 100 1000; 10 100 1000); "
        "knowledge: chunks per namespace (default 1000 10000)",
    )
    p.add_argument(
        "--backends",
        nargs="*",
        choices=["sqlite", "postgresql"],
        help="durable: the databases to run on (default both; PostgreSQL is skipped when unreachable)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="service, replicas: how long the clients run (default 30; --quick 3)",
    )
    p.add_argument(
        "--clients", type=int, default=None, help="service, replicas: concurrent clients (default 50; --quick 5; 6)"
    )
    p.add_argument(
        "--postgres",
        action="store_true",
        help="service: also run on PostgreSQL (a fresh database on $TOOLPLAN_TEST_POSTGRES_URL's server)",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="service: skip the floor server (bench/service_floor.py: FastAPI + uvicorn, one indexed read per "
        "status read, no toolplan), run by default after toolplan's server with the same clients",
    )
    p.add_argument(
        "--langgraph-max", type=int, default=10_000, help="overhead: largest plan given to LangGraph (default 10000)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    todo = BENCHMARKS if args.benchmark == "all" else () if args.benchmark == "report" else (args.benchmark,)
    for name in todo:
        t0 = time.perf_counter()
        module = __import__(f"bench.{name}", fromlist=["main"])
        path = module.main(args, argv)
        common.log(f"{name}: wrote {path} in {time.perf_counter() - t0:.1f}s")
    from .report import write_report

    common.log(f"wrote {write_report(Path(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
