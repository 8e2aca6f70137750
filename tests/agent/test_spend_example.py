from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_spend_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "spend" / "spend_caps.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "stopped at max_total_tokens after 3 model requests",
        "tokens: 3600 in (3000 cached), 240 out",
        "money: 0.007650",
        "partial result: usage_limit, last text 'Searching, turn 3.'",
        "usage_limit: 1 requests, money 0.002550 (" + done.stdout.splitlines()[-1].split("(", 1)[1],
    ]
    assert "max_money" in done.stdout.splitlines()[-1]
