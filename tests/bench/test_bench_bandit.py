"""The bandit benchmark: deterministic per seed, and its committed results meet the issue's targets.

``bench`` is imported in a subprocess from the repository root (this test folder is a package named
``bench`` too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "bandit.json"

CHECK = """
import asyncio, json
from bench import bandit
same = all(
    asyncio.run(bandit.simulate(s, 3, 150)) == asyncio.run(bandit.simulate(s, 3, 150))
    for s in ("thompson", "ucb1", "epsilon_greedy")
)
other = asyncio.run(bandit.simulate("ucb1", 3, 150)) != asyncio.run(bandit.simulate("ucb1", 4, 150))
print(json.dumps({"same": same, "other": other, "best": bandit.BEST, "means": bandit.MEANS}))
"""


def test_the_same_seed_gives_the_same_choices_and_the_best_tool_is_the_reliable_one() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=True
    )
    data = json.loads(done.stdout)
    assert data["same"] and data["other"] and data["best"] == "reliable"
    assert max(data["means"], key=data["means"].__getitem__) == "reliable"


def test_committed_results_meet_the_targets() -> None:
    data = json.loads(RESULTS.read_text())
    assert data["rounds"] == 2000 and len(data["seeds"]) == 20
    ok = data["acceptance"]
    assert ok["thompson_share_ge_0.90"] and ok["ucb1_share_ge_0.80"] and ok["same_seed_same_choices"]
    assert ok["regret_thompson_lt_ucb1"] and ok["regret_epsilon_greedy_lt_uniform"]
    assert (RESULTS.parent / data["plot"]).is_file()
