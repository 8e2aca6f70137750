"""The conformance suite and the worker-death tests on a local Ray cluster.

Not collected by the main test run (its name does not start with ``test_``): `test_ray_namespace.py`
runs it with pytest inside a network and process namespace of its own, because Ray binds wildcard
addresses and leaves processes behind. One cluster serves the whole module (starting one takes
10-20 s here).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_cases import *  # noqa: F403  # the shared cases
from conformance_cases import run, wait_for_file
from ray_backend_support import run_ray_example
from ray_code_cases import *  # noqa: F403  # code mode on Ray, on this module's cluster
from ray_tools import ledger

from toolplan.backends import RayBackend


@pytest.fixture(scope="module")
def ray_backend() -> Iterator[RayBackend]:
    """A local 2-CPU cluster with two actors; ``burn`` runs as a Ray task."""
    with RayBackend(actors=2, cpu_tools=["burn", "charge_cpu"], init_options={"num_cpus": 2}) as backend:
        yield backend


@pytest.fixture
def backend(ray_backend: RayBackend) -> RayBackend:
    return ray_backend


async def _kill_when_started(pid_path: Path) -> int:
    return await asyncio.to_thread(_kill_when_written, pid_path)


def _kill_when_written(pid_path: Path) -> int:
    """Wait until the tool wrote its process id (after its side effect), then kill -9 that process."""
    wait_for_file(pid_path, 60)
    pid = int(pid_path.read_text())
    os.kill(pid, signal.SIGKILL)
    return pid


async def _run_and_kill(tool: str, tmp_path: Path, backend: RayBackend, run_id: str) -> tuple[object, Path, int]:
    path, pid_path = tmp_path / "ledger.jsonl", tmp_path / "pid"
    plan = {"steps": [{"id": "pay", "tool": tool, "arguments": {"ledger_path": str(path), "pid_path": str(pid_path)}}]}
    result, pid = await asyncio.gather(run(plan, backend, run_id=run_id), _kill_when_started(pid_path))
    return result, path, pid


@pytest.mark.parametrize("tool", ["charge", "charge_cpu"])  # on an actor, and as a Ray task
async def test_killed_worker_never_repeats_a_side_effect(tool: str, backend: RayBackend, tmp_path: Path) -> None:
    result, path, pid = await _run_and_kill(tool, tmp_path, backend, "run-kill")
    step = result.steps["pay"]  # type: ignore[attr-defined]
    assert step.status == "failed" and step.attempts == 1
    assert step.error.kind == "unknown_outcome"
    assert "died mid-call" in step.error.message and "'run-kill:pay'" in step.error.message
    assert [r["pid"] for r in ledger(str(path))] == [pid]  # exactly one call: Ray did not run it again


async def test_killed_actor_worker_is_replaced_and_idempotent_call_retried(backend: RayBackend, tmp_path: Path) -> None:
    result, path, pid = await _run_and_kill("lookup", tmp_path, backend, "run-idem")
    step = result.steps["pay"]  # type: ignore[attr-defined]
    assert step.status == "succeeded" and step.attempts == 2
    records = ledger(str(path))
    assert [r["attempt"] for r in records] == [1, 2]
    assert {r["key"] for r in records} == {"run-idem:pay"}
    assert records[1]["pid"] != pid
    # The pool has healed: plans still run on two live actors.
    again = await run({"steps": [{"id": "w", "tool": "weather", "arguments": {"city": "Lima"}}]}, backend)
    assert again.status == "succeeded"


async def test_cpu_tools_run_as_tasks_on_both_cpus(backend: RayBackend) -> None:
    steps = [{"id": f"b{i}", "tool": "burn", "arguments": {"n": 10_000 + i}} for i in range(4)]
    result = await run({"steps": steps}, backend)
    assert result.status == "succeeded"
    assert result.steps["b0"].output == sum(i * i for i in range(10_000)) % 1_000_003


def test_the_docs_example_runs_on_the_cluster(ray_backend: RayBackend, tmp_path: Path) -> None:
    first, second = run_ray_example("run_on_ray.py", tmp_path)
    assert json.loads(first)["status"] == "succeeded"
    assert json.loads(first)["outputs"]["n_ray"] == 13
    assert second.startswith("ray-example:save: ") and second.endswith(" words")


CLI_TOOLS = '''
import os

from toolplan import current_call, tool


@tool
def where(x: int) -> dict[str, object]:
    """Where it ran."""
    with open(f"/proc/{os.getpid()}/cmdline", encoding="utf-8", errors="replace") as f:
        process = f.read()
    return {"x": x, "process": process, "key": current_call().idempotency_key}
'''
CLI_RUN = [sys.executable, "-m", "toolplan.cli", "run", "plan.json", "--tools", "tools.py", "--json"]


def test_cli_runs_a_plan_on_the_cluster(ray_backend: RayBackend, tmp_path: Path) -> None:
    # A tools file the CLI loads by path is not importable on the workers: it travels by value.
    ray = importlib.import_module("ray")
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (tmp_path / "plan.json").write_text(
        '{"steps": [{"id": "a", "tool": "where", "arguments": {"x": 1}}]}', encoding="utf-8"
    )
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [*CLI_RUN, "--backend", f"ray:{address}", "--run-id", "cli-ray"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    step = json.loads(done.stdout)["steps"][0]
    assert step["output"]["x"] == 1 and step["output"]["key"] == "cli-ray:a"
    assert step["output"]["process"].startswith("ray::")  # a Ray worker ran it, not the CLI's own process
