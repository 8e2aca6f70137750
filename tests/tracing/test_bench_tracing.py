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

COST = {"toolplan": 20_050, "unhooked": 20_000, "traced_noop": 22_000, "traced": 30_000, "store_unhooked": 20_010}

def fake(shape, n, phase, k):  # I(K) = start-up + K x steps x cost, as valgrind would count
    return 7_000_000 + k * n * COST[phase]

tracing._instructions = fake
shutil.which = lambda name: "/usr/bin/valgrind"
path = tracing.main(parser().parse_args(["tracing", "--out", sys.argv[1]]), ["tracing"])
print("\\n".join(report.tracing_section(__import__("json").loads(path.read_text()))))
"""


def test_per_step_costs_and_the_report_section(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
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
    expected = {
        "n": 100,
        "off": 20_050,
        "unhooked": 20_000,
        "noop": 22_000,
        "on": 30_000,
        "tracing_per_step": 9_950,
        "noop_per_step": 1_950,
        "off_cost_per_step": 50,
        "off_cost_pct": 0.25,
        "store_unhooked": 20_010,
        "store_off_cost_per_step": 40,
        "store_off_cost_pct": 0.2,
    }
    assert data["cases"] == [{"shape": s, **expected} for s in ("chain", "fanout")]
    assert "| chain | 100 | 20,000 | 20,050 | 22,000 | 30,000 | +50 (+0.25%) | 9,950 |" in proc.stdout
    assert "(the same code with and without its hook, < 0.5% a step): **met** (worst +0.25%)" in proc.stdout
    assert "| chain | 100 | 20,010 | 20,050 | +40 (+0.20%) |" in proc.stdout
    assert "store costs nothing measurable when a run has none" in proc.stdout
    assert "< 0.5% a step): **met** (worst +0.20%)" in proc.stdout


VERDICTS = """
from bench.report import store_verdict, tracing_verdict

row = {"unhooked": 20_000, "off": 20_200, "off_cost_pct": 1.0}
print(tracing_verdict({"settings": {}, "cases": [row]})[0])
old = {"off": 20_050, "before_tracing": 20_000, "off_change_pct": 0.25}  # against an old tree
print(tracing_verdict({"settings": {}, "cases": [old]})[0])
print(store_verdict({"settings": {}, "cases": [{**row, "store_unhooked": 20_000, "store_off_cost_pct": -0.7}]})[0])
print(store_verdict({"settings": {}, "cases": [row]})[0])
"""


def test_a_hook_that_costs_when_off_misses_the_target_and_an_old_tree_is_not_judged() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", VERDICTS], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    missed, old, store_missed, store_old = proc.stdout.splitlines()
    assert "**missed** (worst +1.00%)" in missed
    assert "not judged" in old
    assert "**missed** (worst -0.70%)" in store_missed  # a difference either way is measurable
    assert "not judged" in store_old


UNHOOKED = """
import asyncio, dis
from bench._unhook import unhook_store
from bench.overhead import Case, noop
from toolplan.execute import execute_compiled, prepare
from toolplan.execute._run import PlanRun
from toolplan.execute._step import run_step

def asks(fn):  # the store questions left in a function's code
    return [i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_ATTR" and i.argval in ("journal", "stored")]

async def run(shape):
    compiled, invoker = prepare(Case(shape, 20, seed=0).plan, [noop], max_steps=20)
    result = await execute_compiled(compiled, invoker, max_concurrency=20)
    return result.status, {sid: (r.status, r.output) for sid, r in result.steps.items()}

before = [asyncio.run(run(shape)) for shape in ("chain", "fanout")]
asked = (asks(run_step), asks(PlanRun._work))
folded, undo = unhook_store()
print(sorted(folded))
print(asked[0] and asked[1] and not asks(run_step) and not asks(PlanRun._work))
print([asyncio.run(run(shape)) for shape in ("chain", "fanout")] == before)
undo()
print((asks(run_step), asks(PlanRun._work)) == asked)
"""


def test_the_store_unhooked_engine_never_asks_for_a_store_and_runs_the_same() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", UNHOOKED], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    folded, gone, same, undone = proc.stdout.splitlines()
    assert "_step.run_step" in folded and "_run.PlanRun._work" in folded
    assert gone == same == undone == "True"
