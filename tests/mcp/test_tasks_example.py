"""examples/mcp/long_plan_task.py runs and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import ROOT


@pytest.mark.slow
def test_the_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp" / "long_plan_task.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "task started: working",
        "task completed: 4/4 steps done",
        "outputs: {'sum': 358}",
    ]
