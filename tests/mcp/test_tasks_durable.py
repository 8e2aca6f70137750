"""MCP tasks of a real ``toolplan mcp serve`` process: over stdio, and over HTTP through a kill -9 and restart."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import mcp.types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import ROOT
from task_support import PLAN_TOOL, cancel_task, get_task, list_tasks, start_task, task_result

from toolplan import RunNotFoundError
from toolplan.store import open_store

pytestmark = pytest.mark.slow  # server subprocesses that import the MCP SDK

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}

TOOLS = textwrap.dedent(
    '''
    import asyncio
    import os
    from pathlib import Path

    from toolplan import tool

    LEDGER = Path(os.environ["TASK_LEDGER"])
    GATE = Path(os.environ["TASK_GATE"])


    def note(line: str) -> None:
        with LEDGER.open("a", encoding="utf-8") as f:
            f.write(line + "\\n")


    @tool(idempotent=True)
    async def step(name: str) -> str:
        """Does one step of work; a step named gated waits for the gate file."""
        note(f"start {name}")
        while name == "gated" and not GATE.exists():
            await asyncio.sleep(0.01)
        note(f"done {name}")
        return name.upper()
    '''
)

PLAN = {
    "steps": [
        {"id": "one", "tool": "step", "arguments": {"name": "one"}},
        {"id": "gated", "tool": "step", "arguments": {"name": "gated"}, "depends_on": ["one"]},
        {"id": "three", "tool": "step", "arguments": {"name": "three"}, "depends_on": ["gated"]},
    ],
}
OUTPUTS = {"one": "ONE", "gated": "GATED", "three": "THREE"}


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    yield tmp_path


def _env(workdir: Path) -> dict[str, str]:
    return {**ENV, "TASK_LEDGER": str(workdir / "ledger.txt"), "TASK_GATE": str(workdir / "gate")}


def _ledger(workdir: Path) -> list[str]:
    path = workdir / "ledger.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_task_over_stdio(workdir: Path) -> None:
    (workdir / "gate").touch()
    serve = ["-m", "toolplan", "mcp", "serve", "--tools", str(workdir / "tools.py")]
    params = StdioServerParameters(command=sys.executable, args=serve, env=_env(workdir), cwd=str(workdir))

    async def session() -> tuple[mt.Task, mt.GetTaskResult, mt.CallToolResult, mt.CallToolResult, list[mt.Task]]:
        async with Client(params) as client:
            task = await start_task(client.session, PLAN)
            result = await task_result(client.session, task.task_id)
            state = await get_task(client.session, task.task_id)
            listed = await list_tasks(client.session)
            synchronous = await client.call_tool(PLAN_TOOL, PLAN)
            return task, state, result, synchronous, listed

    task, state, result, synchronous, listed = asyncio.run(session())
    assert task.status == "working"
    assert state.status == "completed" and state.status_message == "completed: 3/3 steps done"
    assert result.structured_content == synchronous.structured_content
    assert result.structured_content == {"status": "succeeded", "outputs": OUTPUTS, "errors": {}}
    assert [t.task_id for t in listed] == [task.task_id]


def test_a_task_over_stdio_is_cancelled(workdir: Path) -> None:
    serve = ["-m", "toolplan", "mcp", "serve", "--tools", str(workdir / "tools.py")]
    params = StdioServerParameters(command=sys.executable, args=serve, env=_env(workdir), cwd=str(workdir))

    async def session() -> tuple[mt.GetTaskResult, mt.CancelTaskResult, mt.CallToolResult]:
        async with Client(params) as client:
            task = await start_task(client.session, PLAN)
            deadline = time.monotonic() + 60
            while "start gated" not in _ledger(workdir):  # the gate stays shut: "gated" runs until cancelled
                assert time.monotonic() < deadline, _ledger(workdir)
                await asyncio.sleep(0.05)
            working = await get_task(client.session, task.task_id)
            cancelled = await cancel_task(client.session, task.task_id)
            return working, cancelled, await task_result(client.session, task.task_id)

    working, cancelled, result = asyncio.run(session())
    assert working.status == "working" and working.status_message == "running: 1/3 steps done"
    assert cancelled.status == "cancelled"
    body = result.structured_content
    assert result.is_error and body is not None and body["status"] == "cancelled"
    assert {sid: e["status"] for sid, e in body["errors"].items()} == {"gated": "cancelled", "three": "not_run"}
    assert "done gated" not in _ledger(workdir)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    serve = [sys.executable, "-m", "toolplan", "mcp", "serve", "--tools", str(workdir / "tools.py")]
    serve += ["--transport", "streamable-http", "--port", str(port), "--store", str(workdir / "runs.db")]
    server = subprocess.Popen(serve, env=_env(workdir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:  # until it listens (or the bound for a slow machine passes)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.05)


async def _step_stored(db: Path, run_id: str, step: str) -> bool:
    async with open_store(f"sqlite:///{db}") as store:
        try:
            info = await store.get_run(run_id)
        except RunNotFoundError:  # its row is written a moment after the run starts
            return False
    record = info.result.steps.get(step)
    return record is not None and record.status == "succeeded"


def test_a_task_survives_a_kill_9_of_its_server(workdir: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    first = _serve_http(workdir, port)
    try:

        async def begin() -> mt.Task:
            async with Client(url) as client:
                return await start_task(client.session, PLAN)

        task = asyncio.run(begin())
        deadline = time.monotonic() + 60
        # killed while "gated" runs, after "one" is on record
        while not (
            "start gated" in _ledger(workdir) and asyncio.run(_step_stored(workdir / "runs.db", task.task_id, "one"))
        ):
            assert time.monotonic() < deadline, _ledger(workdir)
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    (workdir / "gate").touch()

    async def after_restart() -> tuple[mt.GetTaskResult, mt.CallToolResult]:
        async with Client(url) as client:
            state = await get_task(client.session, task.task_id)
            return state, await task_result(client.session, task.task_id)

    second = _serve_http(workdir, port)
    try:
        resumed, result = asyncio.run(after_restart())
    finally:
        second.terminate()
        second.wait(timeout=30)
    assert resumed.status in ("working", "completed")
    assert result.structured_content == {"status": "succeeded", "outputs": OUTPUTS, "errors": {}}
    assert _ledger(workdir).count("start one") == 1  # finished before the kill: not run again
    assert _ledger(workdir).count("done three") == 1

    third = _serve_http(workdir, port)  # a finished task answers from the store
    try:
        finished, again = asyncio.run(after_restart())
    finally:
        third.terminate()
        third.wait(timeout=30)
    assert finished.status == "completed" and finished.status_message == "completed: 3/3 steps done"
    assert again.structured_content == result.structured_content
    assert _ledger(workdir).count("done three") == 1


def test_a_server_stopped_gently_leaves_its_tasks_queued_and_resumes_them(workdir: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    first = _serve_http(workdir, port)
    try:

        async def begin() -> mt.Task:
            async with Client(url) as client:
                return await start_task(client.session, PLAN)

        task = asyncio.run(begin())
        deadline = time.monotonic() + 60
        while "start gated" not in _ledger(workdir):
            assert time.monotonic() < deadline, _ledger(workdir)
            time.sleep(0.05)
    finally:
        first.terminate()  # SIGTERM: a graceful stop
        first.wait(timeout=30)

    async def stored_status() -> str:
        async with open_store(f"sqlite:///{workdir / 'runs.db'}") as store:
            return (await store.get_run(task.task_id)).summary.status

    assert asyncio.run(stored_status()) == "queued"
    (workdir / "gate").touch()

    async def result() -> mt.CallToolResult:
        async with Client(url) as client:
            return await task_result(client.session, task.task_id)

    second = _serve_http(workdir, port)
    try:
        outcome = asyncio.run(result())
    finally:
        second.terminate()
        second.wait(timeout=30)
    assert outcome.structured_content == {"status": "succeeded", "outputs": OUTPUTS, "errors": {}}
    assert _ledger(workdir).count("start one") == 1
