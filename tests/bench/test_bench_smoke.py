"""Smoke test of the benchmark suite: it runs end to end at tiny sizes and writes well-formed results.

No timing assertions: only the shape of the results files (and the deterministic round-trip counts).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run(
        [sys.executable, "-m", "bench", "all", "--quick", "--sizes", "10", "--out", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=540,
    )
    return out


def _load(results: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text())
    assert data["benchmark"] == name
    assert data["quick"] is True
    assert data["machine"]["cpu_count"] >= 1
    assert data["versions"]["toolplan"]
    return data


def test_overhead_shape(results: Path) -> None:
    data = _load(results, "overhead")
    assert {c["shape"] for c in data["cases"]} == {"chain", "fanout", "random"}
    for case in data["cases"]:
        assert case["n"] == 10
        for name in ("toolplan", "toolplan_default_mc", "floor", "wave"):
            assert case["us_per_step"][name]["total"]["median"] > 0
            assert case["peak_memory_bytes"][name] > 0
        assert case["compile_plan_us_per_step"]["median"] > 0
        assert case["ratio_toolplan_to_floor"] > 0
        paired = case["paired_ratio_toolplan_to_floor"]
        assert paired["total"]["n"] == paired["run"]["n"] == 2 and paired["run"]["median"] > 0
        assert case["paired_ratio_gc_off"]["total"]["median"] > 0
        for name in ("toolplan", "floor"):
            watched = case["gc_per_run"][name]
            assert len(watched["collections"]) == 3 and min(watched["collections"]) >= 0
            assert watched["ms"]["n"] == 3 and watched["ms"]["min"] >= 0
    assert data["speed_probe_ms"]["n"] == 5 * len(data["cases"])


def test_instructions_is_skipped_when_quick(results: Path) -> None:
    # Counting under cachegrind takes minutes: --quick skips it (test_instructions_shape covers the code).
    data = _load(results, "instructions")
    assert "--quick" in data["skipped"] and data["cases"] == [] and data["operations"] == []
    assert "Skipped: --quick" in (results / "RESULTS.md").read_text()


FAKE_VALGRIND = """
import shutil, sys
from bench import instructions
from bench.__main__ import parser

def fake_instructions(module, *args):  # I(K) = start-up + K x steps x cost, as valgrind would count
    k, n = int(args[-1]), int(args[1]) if module == "bench._icount" else 1
    return 5_000_000 + k * n * (40_000 if "floor" in args else 50_000)

instructions._instructions = fake_instructions
shutil.which = lambda name: "/usr/bin/valgrind"
instructions.main(parser().parse_args(["instructions", "--sizes", "10", "--out", sys.argv[1]]), ["instructions"])
"""


def test_instructions_shape(tmp_path: Path) -> None:
    # The arithmetic and the results file, with a fake counter in place of valgrind (--quick skips it).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", FAKE_VALGRIND, str(tmp_path)], cwd=ROOT, env=env, check=True, timeout=120)
    data = json.loads((tmp_path / "instructions.json").read_text())
    assert "skipped" not in data
    assert data["operations"] and all(op["instructions"] > 0 for op in data["operations"])
    assert {c["shape"] for c in data["cases"]} == {"chain", "fanout", "random"}
    for case in data["cases"]:
        counts = case["instructions_per_step"]
        assert counts == {"floor": 40_000, "toolplan_compile_plan": 50_000, "toolplan_run": 0, "toolplan": 50_000}
        assert case["ratio_toolplan_to_floor"] == pytest.approx(1.25)


def test_makespan_shape(results: Path) -> None:
    data = _load(results, "makespan")
    assert {c["case"] for c in data["cases"]} == {"unlimited", "tool_limit"}
    for case in data["cases"]:
        assert case["reference_s"] >= case["critical_path_s"] > 0
        for name in ("toolplan", "floor", "wave"):
            assert case["ratio_to_reference"][name] > 0


def test_roundtrips_counts(results: Path) -> None:
    data = _load(results, "roundtrips")
    tasks = {t["task"]: t for t in data["tasks"]}
    assert {"fanout2", "fanout8", "search_compute", "search_chain", "chain5"} <= tasks.keys()
    for task in tasks.values():
        modes = task["modes"]
        assert modes["plan"]["requests"] == 2
        assert modes["react"]["requests"] == task["tool_calls"] + 1
        assert modes["parallel"]["requests"] <= modes["react"]["requests"]
        answers = {m["final_answer"] for m in modes.values()}
        assert len(answers) == 1, answers  # every mode reaches the same answer
    assert tasks["fanout8"]["input_token_ratio_react_to_plan"] >= 3


def test_streaming_shape(results: Path) -> None:
    data = _load(results, "streaming")
    for task in data["tasks"]:
        assert task["plan_tokens"] > 0
        assert task["wait"]["total_s"] >= task["wait"]["first_tool_start_s"] > 0
        assert task["streamed"] == "pending" or task["streamed"]["total_s"] > 0


def test_local_model_is_skipped_when_quick(results: Path) -> None:
    data = _load(results, "local_model")
    assert "--quick" in data["skipped"]
    assert "modes" not in data


def test_replicas_is_skipped_when_quick(results: Path) -> None:
    data = _load(results, "replicas")  # three servers to start: tests/bench/test_bench_replicas.py runs it
    assert "--quick" in data["skipped"] and data["runs"] == []


def test_report_written(results: Path) -> None:
    text = (results / "RESULTS.md").read_text()
    for heading in ("Engine overhead", "Makespan", "Round-trips", "real local model", "Streamed plans", "Durable runs"):
        assert heading in text
    assert "| toolplan collections | floor collections |" in text


BLOCK_OPTIONAL = (
    "import sys; sys.modules.update(langgraph=None, dask=None);"  # as if neither package were installed
    "from bench.__main__ import main; raise SystemExit(main(sys.argv[1:]))"
)


def test_a_contender_that_is_not_installed_is_skipped(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for benchmark in ("overhead", "makespan"):
        subprocess.run(
            [sys.executable, "-c", BLOCK_OPTIONAL, benchmark, "--quick", "--sizes", "10", "--out", str(tmp_path)],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=300,
        )
    report = (tmp_path / "RESULTS.md").read_text()
    assert re.search(r"\bnan", report, re.IGNORECASE) is None  # no "ratio nan", "nanx"
    [target] = [line for line in report.splitlines() if line.startswith("- Target: LangGraph")]
    assert target.endswith("skipped (not installed).") and "missed" not in target
    assert report.count("- Skipped (not installed): LangGraph, Dask threaded.") == 1
    assert report.count("- Skipped (not installed): LangGraph.") == 1
    assert "too slow" not in report
    overhead, makespan = _load(tmp_path, "overhead"), _load(tmp_path, "makespan")
    assert overhead["not_installed"] == ["langgraph", "dask"] and makespan["not_installed"] == ["langgraph"]
    for case in overhead["cases"]:
        assert "langgraph" not in case["us_per_step"] and "dask" not in case["us_per_step"]
        assert case["skipped"] == []  # not installed is not "too slow at that size"
