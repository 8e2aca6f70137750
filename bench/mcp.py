"""Benchmark 6: per-call overhead of MCP tools, in process and over stdio, against calling the tool directly.

Contenders (µs per call; each sample is ``calls`` sequential calls of an ``echo`` tool, divided):

- ``direct``: ``await echo("x")``, the tool's own function (no MCP, no toolplan).
- ``sdk_inprocess``: the MCP SDK's ``Client`` on an in-process ``MCPServer`` (the SDK's floor).
- ``toolset_inprocess``: toolplan's ``MCPToolset.execute`` on the same server: the SDK call plus the
  owner task's queue and future.
- ``sdk_stdio``: the SDK's ``Client`` on ``examples/mcp/kv_server.py`` over stdio (a subprocess).
- ``toolset_stdio``: ``MCPToolset.execute`` on that server.
- ``plan_stdio``: one ``execute_plan`` of ``calls`` independent ``echo`` steps over stdio (a fan-out:
  calls in flight at once), wall time / steps.

All in one process and event loop, interleaved (the order rotates each repetition), after a warm-up.
Connections are opened once per contender, outside the samples.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from . import common

CONTENDERS = ("direct", "sdk_inprocess", "toolset_inprocess", "sdk_stdio", "toolset_stdio", "plan_stdio")
CALLS, QUICK_CALLS = 200, 20
REPS, QUICK_REPS = 7, 2
KV_SERVER = Path(__file__).resolve().parents[1] / "examples" / "mcp" / "kv_server.py"


async def echo(value: str) -> str:
    """The tool: ``value`` itself."""
    return value


async def run(*, calls: int, reps: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.server.mcpserver import MCPServer

    from toolplan import execute_plan
    from toolplan.mcp import MCPToolset

    server = MCPServer("bench", log_level="ERROR")
    server.add_tool(echo)
    stdio = StdioServerParameters(command=sys.executable, args=[str(KV_SERVER)])
    plan = {"steps": [{"id": f"e{i}", "tool": "echo", "arguments": {"value": "x"}} for i in range(calls)]}

    async with (
        Client(server) as sdk_in,
        MCPToolset(server) as ts_in,
        Client(stdio) as sdk_out,
        MCPToolset(stdio) as ts_out,
    ):

        def sequential(call: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
            async def many() -> None:
                for _ in range(calls):
                    await call()

            return many

        async def fan_out() -> None:
            result = await execute_plan(plan, [ts_out], max_concurrency=64, max_steps=calls)
            assert result.ok, result.errors

        bodies: dict[str, Callable[[], Awaitable[None]]] = {
            "direct": sequential(lambda: echo("x")),
            "sdk_inprocess": sequential(lambda: sdk_in.call_tool("echo", {"value": "x"})),
            "toolset_inprocess": sequential(lambda: ts_in.execute("echo", {"value": "x"})),
            "sdk_stdio": sequential(lambda: sdk_out.call_tool("echo", {"value": "x"})),
            "toolset_stdio": sequential(lambda: ts_out.execute("echo", {"value": "x"})),
            "plan_stdio": fan_out,
        }
        samples: dict[str, list[float]] = {name: [] for name in CONTENDERS}
        for body in bodies.values():  # warm-up, outside the samples
            await body()
        for rep in range(reps):
            for name in common.rotate(CONTENDERS, rep):
                common.settle()
                t0 = common.now()
                await bodies[name]()
                samples[name].append((common.now() - t0) / calls * 1e6)
    results = {name: common.summarize(xs) for name, xs in samples.items()}
    med = {name: r["median"] for name, r in results.items()}
    return {
        "calls": calls,
        "reps": reps,
        "us_per_call": results,
        "added_us_per_call": {
            "toolset_over_sdk_inprocess": med["toolset_inprocess"] - med["sdk_inprocess"],
            "toolset_over_sdk_stdio": med["toolset_stdio"] - med["sdk_stdio"],
            "sdk_inprocess_over_direct": med["sdk_inprocess"] - med["direct"],
            "sdk_stdio_over_direct": med["sdk_stdio"] - med["direct"],
        },
        "plan_speedup_over_sequential_stdio": med["toolset_stdio"] / med["plan_stdio"] if med["plan_stdio"] else None,
    }


def main(args: Any, argv: list[str]) -> Path:
    calls = QUICK_CALLS if args.quick else CALLS
    reps = args.reps or (QUICK_REPS if args.quick else REPS)
    data = common.header(
        "mcp",
        quick=args.quick,
        argv=argv,
        tool="echo(value) -> value (async) on an MCPServer: in process, and examples/mcp/kv_server.py over stdio",
        unit="microseconds per call (wall time of `calls` sequential calls / calls), median of repetitions",
        plan="plan_stdio: one execute_plan of `calls` independent echo steps over stdio (max_concurrency=64)",
    )
    from importlib import metadata

    data["versions"]["mcp"] = metadata.version("mcp")
    data["load_average_before"] = list(os.getloadavg())  # other work on the machine shows in every figure
    data.update(asyncio.run(run(calls=calls, reps=reps)))
    data["load_average_after"] = list(os.getloadavg())
    return common.write("mcp", data, Path(args.out))
