"""examples/tool_search/large_catalogue.py runs and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_example_searches_then_plans(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tool_search" / "large_catalogue.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "catalogue: 1020 tools, 1020 deferred" in done.stdout
    assert "first request lists: ['execute_tool_plan', 'search_tools']" in done.stdout
    assert '"tool": "billing_approve_refund"' in done.stdout and '"tool": "billing_notify_refund"' in done.stdout
    assert '"status":"succeeded"' in done.stdout
