"""Smoke test of the benchmark suite: it runs end to end at tiny sizes and writes well-formed results.

No timing assertions: only the shape of the results files (and the deterministic round-trip counts).
"""

from __future__ import annotations

import json
import os
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


def test_instructions_shape(results: Path) -> None:
    data = _load(results, "instructions")
    if data.get("skipped"):  # no valgrind on this machine: the file says so and has no rows
        assert "valgrind" in data["skipped"] and data["cases"] == [] and data["operations"] == []
        return
    assert data["operations"] and all(op["instructions"] > 0 for op in data["operations"])
    assert {c["shape"] for c in data["cases"]} == {"chain", "fanout", "random"}
    for case in data["cases"]:
        counts = case["instructions_per_step"]
        assert counts["floor"] > 0 and counts["toolplan_compile_plan"] > 0 and counts["toolplan_run"] > 0
        assert counts["toolplan"] == pytest.approx(counts["toolplan_compile_plan"] + counts["toolplan_run"], abs=2)


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


def test_report_written(results: Path) -> None:
    text = (results / "RESULTS.md").read_text()
    for heading in ("Engine overhead", "Makespan", "Round-trips", "real local model", "Streamed plans"):
        assert heading in text
    assert "| toolplan collections | floor collections |" in text
