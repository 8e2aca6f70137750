"""``toolplan serve`` fires due schedules, and its own runner runs the runs they queue."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolplan import tool
from toolplan.planner import SUBMIT_TOOL_NAME, Planner
from toolplan.schedules import ScheduleTools
from toolplan.store import open_store
from toolplan.testing import Canned, FakeProvider, ScriptedModel, openai_tool_call

pytest.importorskip("uvicorn", reason="toolplan serve needs toolplan[service]")


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _start(command: list[str], cwd: Path, **more_env: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **more_env}
    with (cwd / "serve.log").open("wb") as log:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=log)


@pytest.mark.slow
async def test_serve_fires_a_due_schedule_and_runs_it(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b\n", encoding="utf-8"
    )
    (tmp_path / "keys").write_text("tpk_schedules_test_key\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2}}]}
    async with open_store(url) as store:
        tools = ScheduleTools(store, [add], clock=lambda: time.time() - 120)
        sid = (await tools.schedule_create("due", plan, "in 60s"))["schedule_id"]  # due a minute ago
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "toolplan", "serve", "--tools", "tools.py", "--db", url, "--port", str(port),
               "--api-key-file", "keys"]  # fmt: skip
    process = _start(command, tmp_path)
    try:
        status = ""
        async with open_store(url) as store:
            for _ in range(600):  # up to a minute for the process to start, fire and run
                runs = await store.list_runs()
                status = runs[0].status if runs else ""
                if status == "succeeded" or process.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            assert status == "succeeded", (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
            (run,) = await store.list_runs()
            info = await store.get_run(run.run_id)
        assert run.parent_id == sid and info.result.steps["s"].output == 3
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


@pytest.mark.slow
async def test_serve_with_a_model_plans_a_due_task_schedule_and_runs_it(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="--model openai:... needs toolplan[openai]")
    (tmp_path / "tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b\n", encoding="utf-8"
    )
    (tmp_path / "keys").write_text("tpk_schedules_test_key\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2}}]}
    async with open_store(url) as store:
        planner = Planner(ScriptedModel([]), [add])
        tools = ScheduleTools(store, [add], clock=lambda: time.time() - 120, planner=planner)
        sid = (await tools.schedule_create("due", when="in 60s", task="Add one and two."))["schedule_id"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "toolplan", "serve", "--tools", "tools.py", "--db", url, "--port", str(port),
               "--api-key-file", "keys", "--model", "openai:scripted"]  # fmt: skip
    with FakeProvider() as provider:
        provider.queue(Canned(body=openai_tool_call(SUBMIT_TOOL_NAME, plan, call_id="call_1")))
        process = _start(command, tmp_path, OPENAI_BASE_URL=f"{provider.url}/v1", OPENAI_API_KEY="sk-scripted")
        try:
            status = ""
            async with open_store(url) as store:
                for _ in range(600):  # up to a minute for the process to start, plan, fire and run
                    runs = await store.list_runs()
                    status = runs[0].status if runs else ""
                    if status == "succeeded" or process.poll() is not None:
                        break
                    await asyncio.sleep(0.1)
                assert status == "succeeded", (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
                (run,) = await store.list_runs()
                info = await store.get_run(run.run_id)
            assert run.parent_id == sid and info.result.steps["s"].output == 3
            assert len(provider.requests) == 1 and "Add one and two." in str(provider.requests[0].body)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
