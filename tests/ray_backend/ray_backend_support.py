"""Helpers shared by the Ray test modules (which run inside their own namespaces, on one cluster)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_ray_example(name: str, cwd: Path) -> tuple[str, str]:
    """Run ``examples/ray/NAME`` against this process's cluster; its last two lines of output."""
    ray = importlib.import_module("ray")
    env = {
        **os.environ,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ray" / name)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = done.stdout.strip().splitlines()[-2:]
    return first, second
