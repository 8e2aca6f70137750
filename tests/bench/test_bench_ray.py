"""Smoke test of ``python -m bench ray``: quick sizes, one repetition; no timing assertions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def test_ray_quick(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = ["ray", "--quick", "--reps", "1", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, check=True, timeout=580)
    data = json.loads((tmp_path / "ray.json").read_text())
    assert data["benchmark"] == "ray" and data["quick"] is True
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## 9. Ray: RayBackend against the in-process backend and raw Ray" in report
    ray_here = shutil.which("unshare") is not None and "ray" in data["versions"]
    if data.get("skipped"):
        assert not ray_here and "Skipped: " in report
        return
    for workload in ("dag", "io", "cpu"):
        assert set(data[workload]) == {"local", "toolplan_ray", "raw_ray"}
        assert all(r["n"] == 1 and r["median"] > 0 for r in data[workload].values())
    assert set(data["targets"]) == {"dag_within_1_5x_of_raw", "io_under_0_5s", "cpu_speedup_at_least_1_8x"}
