from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "schedules/schedule_and_fire.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "run succeeded output 42" in done.stdout


@pytest.mark.slow
def test_the_task_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "schedules/schedule_a_task.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "error: None" in done.stdout and "run succeeded output 42" in done.stdout
