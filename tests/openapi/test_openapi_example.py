"""examples/openapi/pets_api.py runs and prints what it promises."""

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
        [sys.executable, str(ROOT / "examples" / "openapi" / "pets_api.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "get_pet: 'Get one pet by id' read_only=True idempotent=True" in done.stdout
    assert "add_pet: 'Add a pet' read_only=False idempotent=False" in done.stdout
    assert "dogs: ['Rex', 'Fido']" in done.stdout
    assert "nobody: business - GET /pets/{pet_id} answered 404" in done.stdout
