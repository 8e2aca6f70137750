"""Smoke test of ``python -m bench mcp_tasks``: the quick settings, one repetition; no timing assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_mcp_tasks_quick(tmp_path: Path) -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    argv = ["mcp_tasks", "--quick", "--reps", "1", "--out", str(tmp_path)]
    subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        check=True,
        timeout=100,
    )
    data = json.loads((tmp_path / "mcp_tasks.json").read_text())
    assert data["benchmark"] == "mcp_tasks" and data["reps"] == 1
    for way in ("inprocess", "stdio"):
        assert data[way]["result_equals_synchronous"] is True
        assert data[way]["handle_ms"]["n"] == 1
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## MCP tasks: a long plan's task handle" in report
