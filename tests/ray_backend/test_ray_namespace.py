"""Runs `ray_conformance.py` on a local Ray cluster inside namespaces of its own.

Ray binds wildcard addresses and starts many processes: under ``unshare -n -p -f --kill-child``
it gets a private network (loopback only) and every process it starts dies with the namespace.
Skipped when ``ray`` or ``unshare`` is missing, failing instead under ``CI=true``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason} (CI=true: the Ray conformance suite must run)")
    pytest.skip(reason)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ray_conformance_in_its_own_namespace() -> None:
    if importlib.util.find_spec("ray") is None:
        _missing('ray is not installed: pip install "toolplan[ray]"')
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        _missing("unshare and ip (util-linux, iproute2) are needed to give Ray a network of its own")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")])}
    env["RAY_AUTH_MODE"] = "disabled"  # a throwaway cluster on a private loopback
    inner = f"ip link set lo up && exec {sys.executable} -m pytest -q -p no:cacheprovider {HERE / 'ray_conformance.py'}"
    proc = subprocess.run(
        ["unshare", "-n", "-p", "-f", "--kill-child", "--mount-proc", "sh", "-c", inner],
        cwd=HERE.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=580,
    )
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr and "unshare" in proc.stderr:
        _missing(f"unshare is not permitted here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout.splitlines()[-1]
