"""Benchmark: a long plan as an MCP task: how soon the task handle comes back, and whether its result is the call's.

The plan is 10 steps of a tool that sleeps 200 ms, in a chain (2 s of work), so the synchronous call
takes 2 s. ``execute_tool_plan`` called with ``task`` must answer with the task handle at once: the
figure is the wall time from sending that ``tools/call`` to holding the ``CreateTaskResult``, with the
MCP SDK's client, in process and over stdio (``toolplan mcp serve``, a subprocess). Each repetition then
waits for ``tasks/result`` and compares it with a synchronous call of the same plan.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from toolplan import tool

from . import common

STEPS, STEP_SECONDS = 10, 0.2
REPS, QUICK_REPS = 7, 2
WAYS = ("inprocess", "stdio")

TOOL_SOURCE = '''
import asyncio

from toolplan import tool


@tool
async def work(n: int) -> int:
    """Sleeps 200 ms, then returns n + 1."""
    await asyncio.sleep(0.2)
    return n + 1
'''

PLAN: dict[str, Any] = {
    "steps": [{"id": "s0", "tool": "work", "arguments": {"n": 0}}]
    + [{"id": f"s{i}", "tool": "work", "arguments": {"n": f"$ref:s{i - 1}"}} for i in range(1, STEPS)],
}


@tool
async def work(n: int) -> int:
    """Sleeps 200 ms, then returns n + 1 (the same tool as TOOL_SOURCE, for the in-process server)."""
    await asyncio.sleep(STEP_SECONDS)
    return n + 1


async def _measure(session: Any, call_tool: Any, reps: int) -> dict[str, Any]:
    import mcp.types as mt

    handle_ms: list[float] = []
    total_ms: list[float] = []
    same = True
    request = mt.CallToolRequest(
        params=mt.CallToolRequestParams(name="execute_tool_plan", arguments=PLAN, task=mt.TaskMetadata(ttl=60_000))
    )
    for _ in range(reps):
        common.settle()
        t0 = common.now()
        created = await session.send_request(request, mt.CreateTaskResult)
        handle_ms.append((common.now() - t0) * 1e3)
        payload = mt.GetTaskPayloadRequest(params=mt.GetTaskPayloadRequestParams(task_id=created.task.task_id))
        result = await session.send_request(payload, mt.CallToolResult)
        total_ms.append((common.now() - t0) * 1e3)
        synchronous = await call_tool("execute_tool_plan", PLAN)
        same = same and result.structured_content == synchronous.structured_content and not result.is_error
    return {
        "handle_ms": common.summarize(handle_ms),
        "result_ms": common.summarize(total_ms),
        "result_equals_synchronous": same,
    }


async def run(reps: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    from toolplan.mcp import create_server

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tools = Path(tmp) / "tools.py"
        tools.write_text(TOOL_SOURCE, encoding="utf-8")
        async with Client(create_server([work])) as client:
            out["inprocess"] = await _measure(client.session, client.call_tool, reps)
        args = ["-m", "toolplan", "mcp", "serve", "--tools", str(tools)]
        params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
        async with Client(params) as client:
            out["stdio"] = await _measure(client.session, client.call_tool, reps)
            out["protocol_version"] = client.protocol_version
    return out


def main(args: Any, argv: list[str]) -> Path:
    reps = args.reps or (QUICK_REPS if args.quick else REPS)
    data = common.header(
        "mcp_tasks",
        quick=args.quick,
        argv=argv,
        plan=f"a chain of {STEPS} steps of a tool that sleeps {STEP_SECONDS * 1e3:.0f} ms",
        unit="milliseconds: tools/call with task -> CreateTaskResult (handle), and -> tasks/result (result)",
    )
    from importlib import metadata

    data["versions"]["mcp"] = metadata.version("mcp")
    data["reps"] = reps
    data["load_average_before"] = list(os.getloadavg())  # other work on the machine shows in every figure
    data.update(asyncio.run(run(reps)))
    data["load_average_after"] = list(os.getloadavg())
    return common.write("mcp_tasks", data, Path(args.out))
