"""A server that never answers ``initialize`` or ``tools/list`` fails `MCPToolset.connect` with a clear error."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolplan import UserError
from toolplan.mcp import MCPConnectionError, MCPToolset

SILENT = "import sys\nfor _line in sys.stdin:\n    pass  # reads every request, answers none\n"

# Answers the handshake, then never answers tools/list.
MUTE_LISTING = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg["method"] == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "mute", "version": "1"}}
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        elif msg["method"] == "tools/list":
            continue
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}}
        print(json.dumps(reply), flush=True)
    """
)


def _script(tmp_path: Path, name: str, text: str) -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    return [sys.executable, str(path)]


async def test_a_stdio_server_that_never_answers_initialize(tmp_path: Path) -> None:
    toolset = MCPToolset.stdio(_script(tmp_path, "silent.py", SILENT), connect_timeout=0.5)
    with pytest.raises(MCPConnectionError) as caught:
        await toolset.connect()
    message = caught.value.message
    assert "silent.py" in message and "did not answer initialize within 0.5 s" in message
    assert "speaking over stdio" in message and "connect_timeout" in message
    assert caught.value.code == "mcp_connection_error"
    assert not toolset.connected
    await toolset.aclose()


async def test_a_stdio_server_that_never_answers_tools_list(tmp_path: Path) -> None:
    toolset = MCPToolset.stdio(_script(tmp_path, "mute.py", MUTE_LISTING), connect_timeout=0.5)
    with pytest.raises(MCPConnectionError, match=r"mute\.py.*did not answer tools/list within 0\.5 s"):
        await toolset.connect()
    with pytest.raises(MCPConnectionError, match="tools/list"):  # connecting again starts over, with its deadline
        await toolset.connect()
    await toolset.aclose()


@contextlib.asynccontextmanager
async def silent_http_server() -> AsyncIterator[str]:
    """Accepts connections and reads requests, answers nothing."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while await reader.read(4096):
                pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0, family=socket.AF_INET)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)


async def test_an_http_server_that_never_answers() -> None:
    async with silent_http_server() as url:
        for toolset in (MCPToolset(url, connect_timeout=0.5), MCPToolset(url, headers={"X": "y"}, connect_timeout=0.5)):
            with pytest.raises(MCPConnectionError) as caught:
                await toolset.connect()
            assert url in caught.value.message and "did not answer initialize within 0.5 s" in caught.value.message
            assert "MCP endpoint" in caught.value.message
            await toolset.aclose()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_connect_timeout_must_be_positive(bad: float) -> None:
    with pytest.raises(UserError, match="connect_timeout"):
        MCPToolset("http://127.0.0.1:1/mcp", connect_timeout=bad)
