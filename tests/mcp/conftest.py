"""Shared fixtures of the MCP tests: the example stdio server's command line, a free loopback socket."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
from mcp_support import KV_SERVER


@pytest.fixture
def kv_command() -> list[str]:
    """The command that starts examples/mcp/kv_server.py (a real stdio MCP server)."""
    return [sys.executable, str(KV_SERVER)]


@pytest.fixture
def loopback_socket() -> Iterator[socket.socket]:
    """A socket bound to 127.0.0.1 on a free port (for a server to serve on)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock
    finally:
        sock.close()
