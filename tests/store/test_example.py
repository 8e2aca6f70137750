"""examples/durable/crash_and_resume.py does what docs/durable.md says it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import toolplan

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(toolplan.__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_crash_and_resume_example(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable" / "crash_and_resume.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "first attempt: killed=True" in out
    assert "Run unfinished: 2 succeeded, 1 running, 1 pending." in out
    assert "[unknown_outcome]" in out and "idempotency key 'trip-1:pay'" in out
    assert out.count("charges made: 1") == 2  # never charged twice, not even with --rerun-unknown
    assert "Plan succeeded: 4 succeeded (2 reused from the store, not run again)" in out
