"""Smoke test of ``python -m bench mcp``: the quick sizes, one repetition; no timing assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_mcp_quick(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = ["mcp", "--quick", "--reps", "1", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, check=True, timeout=100)
    data = json.loads((tmp_path / "mcp.json").read_text())
    assert data["benchmark"] == "mcp" and data["quick"] is True and data["reps"] == 1
    assert set(data["us_per_call"]) == {
        "direct",
        "sdk_inprocess",
        "toolset_inprocess",
        "sdk_stdio",
        "toolset_stdio",
        "plan_stdio",
    }
    assert all(r["n"] == 1 and r["median"] > 0 for r in data["us_per_call"].values())
    assert data["versions"]["mcp"]
    report = (tmp_path / "RESULTS.md").read_text()
    assert "## 6. MCP tools: per-call overhead" in report and "| toolplan MCPToolset, stdio server |" in report
