"""A small MCP server over stdio: a key-value store whose tools say how they behave.

Run plans over it with toolplan (see docs/mcp.md):

    toolplan mcp tools --stdio "python examples/mcp/kv_server.py"
    toolplan run examples/mcp/plan.json --mcp-stdio "python examples/mcp/kv_server.py"

``get`` and ``keys`` are read-only, so toolplan runs them at once; ``put`` changes the store, so
toolplan's calls of it take turns. ``stats`` tells what the server saw: the most ``get`` and ``put``
calls that ran at the same time. The ``gather`` arguments make that visible on purpose: a call waits
(a bounded time) for that many calls of its tool to be running together. The tests and the
benchmark use them, and ``sleep``, which tells a Unix socket when it has started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import mcp.types as mt
from mcp.server.mcpserver import MCPServer

server = MCPServer("kv", log_level="ERROR")
READ_ONLY = mt.ToolAnnotations(read_only_hint=True)

_store: dict[str, str] = {}
_running = {"get": 0, "put": 0}
_most = {"get": 0, "put": 0}
_changed = asyncio.Condition()


async def _gathered(tool: str, gather: int, wait: float) -> None:
    """Count this call as running; wait at most ``wait`` s until ``gather`` calls of ``tool`` run at once."""
    async with _changed:
        _running[tool] += 1
        _most[tool] = max(_most[tool], _running[tool])
        _changed.notify_all()
        if gather > 1:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await _changed.wait_for(lambda: _most[tool] >= gather)


async def _done(tool: str) -> None:
    async with _changed:
        _running[tool] -= 1


@server.tool(annotations=READ_ONLY)
async def get(key: str, gather: int = 0) -> str | None:
    """The value stored under ``key`` (None if there is none)."""
    await _gathered("get", gather, 10.0)
    try:
        return _store.get(key)
    finally:
        await _done("get")


@server.tool(annotations=mt.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
async def put(key: str, value: str, idempotency_key: str = "", gather: int = 0) -> dict[str, str]:
    """Store ``value`` under ``key``; returns what was stored and the idempotency key it came with."""
    await _gathered("put", gather, 1.0)
    try:
        _store[key] = value
        return {"key": key, "value": value, "idempotency_key": idempotency_key}
    finally:
        await _done("put")


@server.tool(annotations=READ_ONLY)
def keys() -> list[str]:
    """Every key, sorted."""
    return sorted(_store)


@server.tool(annotations=READ_ONLY)
async def echo(value: str) -> str:
    """``value`` itself (to measure the cost of a call)."""
    return value


@server.tool(annotations=READ_ONLY)
def stats() -> dict[str, int]:
    """The most ``get`` and ``put`` calls that ran at once so far, and this server's process id."""
    return {"max_parallel_gets": _most["get"], "max_parallel_puts": _most["put"], "pid": os.getpid()}


@server.tool(annotations=READ_ONLY)
async def sleep(seconds: float, started: str = "") -> str:
    """Sleep; first connect to the Unix socket ``started`` (if given) to say the call began."""
    if started:
        _, writer = await asyncio.open_unix_connection(started)
        writer.write(b"started\n")
        await writer.drain()
        writer.close()
    await asyncio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    server.run("stdio")
