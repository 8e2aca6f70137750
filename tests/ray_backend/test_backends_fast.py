"""What needs no Ray: the backend spec, the import guard, and how a dead worker ends a step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import toolplan
from toolplan import CallContext, OptionalDependencyError, UserError, WorkerDiedError, execute_plan, tool
from toolplan.backends import RayBackend, backend_from_spec
from toolplan.execute import Backend, no_retry_backoff
from toolplan.tools import Tool, ToolResult


@pytest.mark.parametrize("spec", [None, "", "local", "  local "])
def test_local_specs_mean_the_inlined_default(spec: str | None) -> None:
    assert backend_from_spec(spec) is None


@pytest.mark.parametrize("spec", ["bogus", "ray:", "ray: ", "dask:host", "x" * 600, "rayy"])
def test_bad_specs_name_the_accepted_ones(spec: str) -> None:
    with pytest.raises(UserError, match="local, ray, or ray:ADDRESS"):
        backend_from_spec(spec)


def test_without_ray_the_guard_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    with pytest.raises(OptionalDependencyError, match=r'pip install "toolplan\[ray\]"') as info:
        backend_from_spec("ray:auto")
    assert info.value.code == "missing_dependency"
    with pytest.raises(OptionalDependencyError, match=r'pip install "toolplan\[ray\]"'):
        RayBackend().start()


def test_ray_backend_checks_its_options() -> None:
    with pytest.raises(UserError, match="at least one actor"):
        RayBackend(actors=0)
    with pytest.raises(UserError, match="max_concurrency"):
        RayBackend(max_concurrency=0)
    with pytest.raises(UserError, match="list of tool names"):
        RayBackend(cpu_tools="burn")
    backend = RayBackend(address="auto", cpu_tools=["burn"])
    assert isinstance(backend, Backend)
    assert repr(backend) == "RayBackend(address='auto', actors=2, cpu_tools=['burn'])"


class DyingBackend:
    """A backend whose worker dies on the first ``deaths`` calls (as `RayBackend` reports it)."""

    def __init__(self, deaths: int) -> None:
        self.deaths = deaths
        self.calls: list[tuple[str, int, str]] = []

    async def invoke(self, tool: Tool, name: str, arguments: Mapping[str, Any], call: CallContext) -> ToolResult:
        self.calls.append((name, call.attempt, call.idempotency_key))
        if len(self.calls) <= self.deaths:
            safe = name == "read"
            raise WorkerDiedError(f"worker died running {name}", tool=name, outcome_unknown=not safe)
        return await tool.execute(name, arguments)


@tool(read_only=True)
def read() -> str:
    """Read something."""
    return "data"


@tool
def write() -> str:
    """Write something."""
    return "written"


async def test_a_dead_worker_ends_an_unsafe_step_unknown_without_a_retry() -> None:
    backend = DyingBackend(deaths=1)
    plan = {
        "steps": [
            {"id": "w", "tool": "write", "arguments": {}, "retry": 3},
            {"id": "x", "tool": "read", "arguments": {}},
        ]
    }
    with no_retry_backoff():
        result = await execute_plan(plan, [read, write], backend=backend, run_id="r1")
    w = result.steps["w"]
    assert w.status == "failed" and w.attempts == 1
    assert w.error is not None and w.error.kind == "unknown_outcome" and w.error.message == "worker died running write"
    assert [c for c in backend.calls if c[0] == "write"] == [("write", 1, "r1:w")]  # even though the step asked retries


async def test_a_dead_worker_retries_a_read_only_step_with_the_same_key() -> None:
    backend = DyingBackend(deaths=1)
    with no_retry_backoff():
        result = await execute_plan(
            {"steps": [{"id": "r", "tool": "read", "arguments": {}, "retry": 2}]}, [read], backend=backend, run_id="r2"
        )
    assert result.steps["r"].status == "succeeded" and result.steps["r"].attempts == 2
    assert backend.calls == [("read", 1, "r2:r"), ("read", 2, "r2:r")]


CLI_TOOLS = '''
from toolplan import tool


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b
'''
CLI_PLAN = '{"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]}'


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolplan run`` on a one-step plan in ``tmp_path`` (tools.py, plan.json), in a subprocess."""
    (tmp_path / "tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (tmp_path / "plan.json").write_text(CLI_PLAN, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(toolplan.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "toolplan.cli", "run", "plan.json", "--tools", "tools.py", "--json", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_backend_local_runs_in_process(tmp_path: Path) -> None:
    done = cli(tmp_path, "--backend", "local")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"][0]["output"] == 3


def test_cli_rejects_an_unknown_backend(tmp_path: Path) -> None:
    done = cli(tmp_path, "--backend", "spark")
    assert done.returncode == 2
    assert "--backend: Unknown backend 'spark': use local, ray, or ray:ADDRESS." in done.stderr


def test_serve_rejects_an_unknown_backend_before_serving(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(toolplan.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "toolplan.cli", "serve", "--tools", "tools.py", "--backend", "ray:"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--backend: Unknown backend 'ray:': use local, ray, or ray:ADDRESS." in done.stderr


def test_service_config_takes_a_backend_object_only() -> None:
    from toolplan.service import ServiceConfig

    backend = DyingBackend(deaths=0)
    assert ServiceConfig(backend=backend).backend is backend
    with pytest.raises(UserError, match=r"ServiceConfig\.backend must be a toolplan backend"):
        ServiceConfig(backend="ray")  # type: ignore[arg-type]
