"""Quick run of ``python -m bench replicas``: 1 and 2 serve processes on PostgreSQL, every call made once.

No timing assertions: the clients' errors, the calls each process made, the store, the model and the
report. Needs the machine's PostgreSQL (as the service tests): skipped when it cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def test_replicas_share_the_work_and_make_every_call_once(tmp_path: Path, postgres_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = ["replicas", "--quick", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, check=True, timeout=220)
    data = json.loads((tmp_path / "replicas.json").read_text())
    assert data["benchmark"] == "replicas" and "skipped" not in data
    assert [r["processes"] for r in data["runs"]] == [1, 2]
    for run in data["runs"]:
        assert run["errors"] == 0, run["error_samples"]
        assert run["plans_completed"] > 0 and run["verified"]["ok"], run["verified"]
        calls = run["calls"]
        assert calls["ok"] and calls["made_twice"] == calls["missing"] == calls["extra"] == 0, calls
        assert calls["calls_made"] == calls["calls_expected"] >= 2 * run["plans_completed"]
        assert len(calls["calls_per_process"]) == run["processes"]  # each process ran some
        assert run["postgresql"]["commits_per_plan"] > 0 and run["postgresql"]["connections_peak"] >= 1
    assert data["exactly_once"] is True and data["speedup"] > 0
    assert [r["replicas"] for r in data["model"]["replicas"]] == [8, 32]
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## 7b. Replicas" in report
    assert "- Target: no execution run twice (every tool call made exactly once): **met**." in report
