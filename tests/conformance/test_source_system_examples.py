"""The examples for users of the source systems run, each in a Python process of its own, and say what they show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolplan
from toolplan.cli import app

ROOT = Path(__file__).resolve().parents[2]


def run_example(path: str, tmp_path: Path) -> str:
    src = str(Path(toolplan.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(ROOT / path)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


@pytest.mark.slow  # a Python process of its own
def test_the_acp_example_replans_and_reports_states(tmp_path: Path) -> None:
    out = run_example("examples/acp/declared_plans.py", tmp_path)
    assert "declared: [('p1', None), ('p2', 'p1')]" in out
    assert "p1 budget after scaleFactor 1.5: 3" in out
    assert "findings with the replan: []" in out
    assert "p2 alone against every call: [('PlanDeviation', 'undeclared_call', 'p2')]" in out
    assert "chain: succeeded 'the answer: 42' from link 2 after 3 calls" in out
    assert "ACP plan updates: ['Planned', 'InProgress', 'Complete', 'Complete']" in out


@pytest.mark.slow  # a Python process of its own
def test_the_chaining_example_stops_at_the_first_failure(tmp_path: Path) -> None:
    out = run_example("examples/chaining/execution_order.py", tmp_path)
    assert "send_email   not_run  (Not started: the plan stopped after step 'create_blog' failed" in out
    assert "fail_forward: send_email succeeded" in out and "parallel: send_email succeeded" in out


@pytest.mark.slow  # a Python process of its own
def test_the_oasis_example_runs_a_batch_under_oasis_names(tmp_path: Path) -> None:
    out = run_example("examples/oasis/batch.py", tmp_path)
    assert "0 file_list ok" in out and "1 file_stat ok" in out
    assert "2 file_read error" in out and "inside the workspace" in out
    assert '3 data_aggregate ok [{"region": "north", "total": 12}, {"region": "south", "total": 5}]' in out


@pytest.mark.slow  # a Python process of its own
def test_the_cogent_example_runs_the_executors(tmp_path: Path) -> None:
    out = run_example("examples/cogent/executors.py", tmp_path)
    assert "native: 3 lamps, no desks, 8 chairs. (at most 3 calls at once)" in out
    assert "sequential: 3 lamps, no desks, 8 chairs. (at most 1 at once, in order ['lamp', 'desk', 'chair'])" in out
    assert "arun: 3 lamps, no desks, 8 chairs. (2 model requests)" in out


def test_the_oasis_batch_file_runs_from_the_cli() -> None:
    args = [
        "run",
        str(ROOT / "examples/oasis/batch.json"),
        "--tools",
        f"{ROOT / 'examples/oasis/tools.py'}:TOOLS",
        "--json",
    ]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    assert [s["status"] for s in json.loads(done.stdout)["steps"]] == [
        "succeeded",
        "succeeded",
        "failed",
        "succeeded",
    ]
