"""The tracing-cost benchmark's arithmetic and report section, with a fake counter in place of valgrind.

``bench`` is imported in a subprocess from the repository root (``tests/bench`` is a package of
that name too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_VALGRIND = """
import shutil, sys
from bench import report, tracing
from bench.__main__ import parser

def fake(src, shape, n, phase, k):  # I(K) = start-up + K x steps x cost, as valgrind would count
    cost = 30_000 if phase == "traced" else 20_050 if src is None else 20_000
    return 7_000_000 + k * n * cost

tracing._instructions = fake
shutil.which = lambda name: "/usr/bin/valgrind"
path = tracing.main(parser().parse_args(["tracing", "--out", sys.argv[1]]), ["tracing"])
print("\\n".join(report.tracing_section(__import__("json").loads(path.read_text()))))
"""


def test_per_step_costs_and_the_report_section(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TOOLPLAN_BASELINE_SRC": "/elsewhere/src",
    }
    proc = subprocess.run(
        [sys.executable, "-c", FAKE_VALGRIND, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    data = json.loads((tmp_path / "tracing.json").read_text())
    expected = {"n": 100, "off": 20_050, "on": 30_000, "tracing_per_step": 9_950, "before_tracing": 20_000}
    assert data["cases"] == [{"shape": s, **expected, "off_change_pct": 0.25} for s in ("chain", "fanout")]
    assert "| chain | 100 | 20,050 | 30,000 | 9,950 | 20,000 | +0.25% |" in proc.stdout
    assert "(< 0.5%): **met** (worst 0.25%)" in proc.stdout
