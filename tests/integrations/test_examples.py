"""examples/integrations/*.py run as a reader would run them, and print what their comments say."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import toolplan

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(toolplan.__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
NEEDS = {"pydantic_ai_agent.py": "pydantic_ai", "openai_agents_agent.py": "agents", "langgraph_agent.py": "langgraph"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEEDS))
def test_example_runs(name: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(NEEDS[name]) is None:
        pytest.skip(f"{NEEDS[name]} is not installed")
    done = subprocess.run(
        [sys.executable, "-W", "error", str(ROOT / "examples" / "integrations" / name)],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"outputs":{"cmp":"15.0 degrees apart"}' in done.stdout or "15 degrees." in done.stdout
