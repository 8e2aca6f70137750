"""examples/conditions/ does what its docstring says, as a script and through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import toolplan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "conditions"
SRC = Path(toolplan.__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=120, check=False, cwd=ROOT
    )


def test_the_script_buys_what_is_in_stock_and_back_orders_the_rest() -> None:
    done = _run(str(EXAMPLE / "order.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "pen x4: plan succeeded",
        "  buy: succeeded: bought 4 pen for 10.0",
        "  later: skipped: Condition false: $ref:stock.available < 4 ($ref:stock.available is 12).",
        "lamp x4: plan succeeded",
        "  buy: skipped: Condition false: $ref:stock.available >= 4 ($ref:stock.available is 3).",
        "  later: succeeded: back-ordered 1 lamp",
    ]


def test_the_plan_file_is_the_scripts_plan_and_runs_from_the_command_line() -> None:
    code = f"import json, sys; sys.path.insert(0, {str(EXAMPLE)!r}); import order; "
    code += "print(json.dumps(order.plan('lamp', 4)))"
    made = _run("-c", code)
    assert made.returncode == 0, made.stderr
    assert json.loads((EXAMPLE / "plan.json").read_text(encoding="utf-8")) == json.loads(made.stdout)
    done = _run("-m", "toolplan", "run", str(EXAMPLE / "plan.json"), "--tools", str(EXAMPLE / "tools.py"), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["status"] == "succeeded"
    assert data["outputs"]["later"] == "back-ordered 1 lamp"
