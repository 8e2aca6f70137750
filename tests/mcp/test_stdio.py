"""A real stdio MCP server in a subprocess (examples/mcp/kv_server.py): scheduling by its hints, and
what happens when it is killed in the middle of a plan."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path

import mcp.types as mt
import pytest
from mcp.server.mcpserver import MCPServer

from toolplan import execute_plan, tool
from toolplan.execute import PlanEvent, StepFinished
from toolplan.mcp import MCPToolset

pytestmark = pytest.mark.slow  # each test starts a Python MCP server (about 2 s to import the SDK)


async def test_mutations_never_overlap_while_reads_do(kv_command: list[str]) -> None:
    # 8 reads that each wait (up to 10 s) until 8 reads run at once, and 2 writes that each wait (up
    # to 1 s) for a second write: the server records the most calls of each that ran together. The
    # reads are the same call of a read-only, idempotent tool, so the plan asks for each to be made.
    reads = [{"id": f"get{i}", "tool": "get", "arguments": {"key": "k", "gather": 8}} for i in range(8)]
    writes = [
        {"id": f"put{i}", "tool": "put", "arguments": {"key": "k", "value": str(i), "gather": 2}} for i in range(2)
    ]
    async with MCPToolset.stdio(kv_command) as kv:
        result = await execute_plan({"steps": [*reads, *writes], "share_calls": False}, [kv], run_id="overlap")
        stats = (await kv.execute("stats", {})).content
    assert result.ok, result.errors
    assert len(result.steps) == 10
    assert stats["max_parallel_gets"] == 8  # the read-only steps all ran at once
    assert stats["max_parallel_puts"] == 1  # the two mutating steps never overlapped
    assert {result.outputs[f"put{i}"]["idempotency_key"] for i in range(2)} == {"overlap:put0", "overlap:put1"}


# The MCP SDK reaps the server it started by polling for its exit code, for a bounded time. On a loaded
# machine the SIGKILLed server's asyncio transport is sometimes dropped before the exit code arrives:
# Python then warns, when the transport is collected, that the (dead) process "is still running". The
# collection is forced at the end of this test so that such a warning is this test's, and ignored here.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <function Popen.__del__:pytest.PytestUnraisableExceptionWarning"
)
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <function BaseSubprocessTransport.__del__:pytest.PytestUnraisableExceptionWarning"
)
async def test_a_killed_server_fails_only_its_running_steps(kv_command: list[str], tmp_path: Path) -> None:
    started = 0
    both_started = asyncio.Event()

    async def on_start(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal started
        await reader.readline()
        writer.close()
        started += 1
        if started == 2:
            both_started.set()

    sock_path = str(tmp_path / "started.sock")
    listener = await asyncio.start_unix_server(on_start, sock_path)

    sibling_server = MCPServer("sibling", log_level="ERROR")
    killed = asyncio.Event()

    @sibling_server.tool(annotations=mt.ToolAnnotations(read_only_hint=True))
    async def after_the_kill() -> str:
        await killed.wait()
        return "still here"

    @tool
    async def local() -> str:
        await killed.wait()
        return "local too"

    plan = {
        "steps": [
            {"id": "nap1", "tool": "sleep", "arguments": {"seconds": 600, "started": sock_path}},
            {"id": "nap2", "tool": "sleep", "arguments": {"seconds": 600, "started": sock_path}},
            {"id": "then", "tool": "keys", "arguments": {}, "depends_on": ["nap1"]},
            {"id": "sibling", "tool": "after_the_kill", "arguments": {}},
            {"id": "local", "tool": "local", "arguments": {}},
        ]
    }
    ended: set[str] = set()
    naps_ended = asyncio.Event()

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepFinished) and event.result.id in ("nap1", "nap2"):
            ended.add(event.result.id)
            if len(ended) == 2:
                naps_ended.set()

    # Hints not trusted: the failed read-only steps are not retried (that would start the server again).
    kv = MCPToolset.stdio(kv_command, trust_hints=False)
    sibling = MCPToolset(sibling_server)
    async with listener:
        await kv.connect()
        await sibling.connect()
        pid = (await kv.execute("stats", {})).content["pid"]
        running = asyncio.create_task(execute_plan(plan, [kv, sibling, local], on_event=on_event))
        await both_started.wait()
        os.kill(pid, signal.SIGKILL)
        await naps_ended.wait()  # the server's steps end first; the siblings wait for that
        killed.set()
        result = await running
    for step in ("nap1", "nap2"):
        error = result.errors[step]
        assert error.kind == "infrastructure" and "closed the connection" in error.message, error
    assert result.steps["then"].status == "skipped"
    assert result.outputs["sibling"] == {"result": "still here"} and result.outputs["local"] == "local too"
    await kv.aclose()  # closing after the server died raises nothing
    await sibling.aclose()
    assert not kv.connected
    gc.collect()  # (see above)
