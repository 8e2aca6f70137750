"""Quick run of ``python -m bench service``: 5 clients for 3 s on SQLite; no error, nothing lost.

No timing assertions: the clients' errors, what the store holds afterwards, and the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def test_service_load_has_no_error_and_loses_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = ["service", "--seconds", "3", "--clients", "5", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, check=True, timeout=150)
    data = json.loads((tmp_path / "service.json").read_text())
    assert data["benchmark"] == "service" and data["settings"]["clients"] == 5
    [run] = data["runs"]
    assert run["backend"] == "sqlite" and "skipped" not in run
    assert run["errors"] == 0, run["error_samples"]
    assert run["wrong"] == 0, run["wrong_samples"]
    assert run["plans_completed"] > 0 and run["status_read_ms"]["n"] >= run["plans_completed"]
    verified = run["verified"]
    assert verified["ok"] and verified["lost"] == 0, verified["lost_samples"]
    assert verified["executions_stored"] == verified["executions_got"] >= run["plans_completed"]
    assert verified["plans_stored"] == verified["plans_got"] and verified["extra_executions"] == 0
    assert run["server"]["log_problems"] == []
    floor = run["floor"]  # the floor server, under the same clients, on the same database
    assert floor["errors"] == 0 and floor["wrong"] == 0, floor["error_samples"] + floor["wrong_samples"]
    assert floor["plans_completed"] > 0 and floor["server"]["log_problems"] == []
    versus = run["versus_floor"]
    assert versus["status_read_p99_ratio"] > 0 and versus["cpu_per_plan_ratio"] > 0
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## 7. Planner service under load" in report
    assert "- Target: no error and nothing lost or doubled, on every database run: **met**." in report
    assert "- Target: p99 status read <= 2x the floor's p99, on every database:" in report
