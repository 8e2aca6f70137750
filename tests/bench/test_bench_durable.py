"""Smoke test of ``python -m bench durable``: SQLite only, the tiniest plans, one repetition.

No timing assertions: the rows, the contenders in them (or why they were skipped) and the report.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_durable_sqlite(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = ["durable", "--quick", "--sizes", "3", "--reps", "1", "--backends", "sqlite", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, check=True, timeout=100)
    data = json.loads((tmp_path / "durable.json").read_text())
    assert data["benchmark"] == "durable" and data["quick"] is True
    assert list(data["backends"]) == ["sqlite"]
    skipped = data["backends"]["sqlite"]["skipped"]
    assert [(c["backend"], c["shape"], c["n"]) for c in data["cases"]] == [
        ("sqlite", "chain", 3),
        ("sqlite", "fanout", 3),
    ]
    expected = {"toolplan", "toolplan_durable", "dbos", "dbos_sync"} - skipped.keys()
    for case in data["cases"]:
        names = expected - ({"dbos_sync"} if case["shape"] == "fanout" else set())
        assert set(case["ms_per_step"]) == names
        for name in names:
            assert case["ms_per_step"][name]["n"] == 1 and case["ms_per_step"][name]["median"] > 0
        if "toolplan_durable" in names:
            assert "store_added_ms_per_step" in case
            per_step = case["toolplan_durable_per_step"]  # counted by the store: at least one commit per run
            assert per_step["commits"] * case["n"] >= 1 and per_step["round_trips"] == 0  # SQLite: in-process
        if {"toolplan_durable", "dbos"} <= names:
            assert case["ratio_dbos_to_toolplan_durable"]["dbos"] > 0
    if importlib.util.find_spec("dbos") is not None:
        assert {"dbos", "dbos_sync"}.isdisjoint(skipped)
        dbos = data["backends"]["sqlite"]["dbos"]
        assert (dbos["journal_mode"], dbos["synchronous"]) == ("wal", "NORMAL")  # as toolplan's store
    else:
        assert skipped["dbos"] == "not installed"
    if importlib.util.find_spec("toolplan.store") is not None:
        assert "toolplan_durable" not in skipped
        assert "resume(run_id" in data["toolplan_crash_guarantee"]
    assert skipped.keys() <= {"toolplan_durable", "dbos", "dbos_sync"}  # the baseline always runs
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## 5. Durable runs" in report
    assert "- Target: a durable toolplan step on SQLite costs ≤ 0.3 ms in a 10-step chain" in report
    assert "| sqlite | fanout | 3 |" in report
