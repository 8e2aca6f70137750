"""A loopback MCP HTTP server, however its address is spelled, answers only requests that name it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from toolplan import UserError
from toolplan.mcp import MCPToolset, create_server, serve_http

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def _bound(family: socket.AddressFamily, address: str) -> socket.socket:
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, 0))
    sock.listen(100)
    return sock


@pytest.fixture
def sock_127_0_0_2() -> Iterator[socket.socket]:
    sock = _bound(socket.AF_INET, "127.0.0.2")
    with contextlib.closing(sock):
        yield sock


@pytest.fixture
def sock_v6() -> Iterator[socket.socket]:
    try:
        sock = _bound(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with contextlib.closing(sock):
        yield sock


@contextlib.asynccontextmanager
async def serving(sock: socket.socket, host: str, token: str | None = None) -> AsyncIterator[None]:
    task = asyncio.create_task(serve_http(create_server([shout]), host=host, sock=sock, token=token))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _post(url: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})


async def test_a_server_on_127_0_0_2_refuses_a_rebound_name_and_a_web_origin(sock_127_0_0_2: socket.socket) -> None:
    port = sock_127_0_0_2.getsockname()[1]
    url = f"http://127.0.0.2:{port}/mcp"
    async with serving(sock_127_0_0_2, "127.0.0.2"):
        async with MCPToolset(url) as remote:  # a client on this machine, no token needed
            assert (await remote.execute("shout", {"text": "hi"})).content == "HI"
        rebound = await _post(url, Host=f"attacker.example:{port}")  # a web page's name re-pointed at 127.0.0.2
        assert rebound.status_code == 421 and rebound.json()["code"] == "wrong_host"
        for other in (f"localhost:{port}", f"127.0.0.1:{port}", "", "[127.0.0.2"):  # names of other addresses
            assert (await _post(url, Host=other)).status_code == 421, other
        cross = await _post(url, Origin="https://attacker.example")
        assert cross.status_code == 403 and cross.json()["code"] == "forbidden_origin"
        assert (await _post(url, Origin="null")).status_code == 403
        same = await _post(url, Origin=f"http://127.0.0.2:{port}")
        assert same.status_code == 200


async def test_an_ipv6_loopback_in_any_spelling_is_guarded(sock_v6: socket.socket) -> None:
    port = sock_v6.getsockname()[1]
    url = f"http://[::1]:{port}/mcp"
    async with serving(sock_v6, "0:0:0:0:0:0:0:1"):
        async with MCPToolset(url) as remote:
            assert (await remote.execute("shout", {"text": "v6"})).content == "V6"
        assert (await _post(url, Host=f"[0:0:0:0:0:0:0:1]:{port}")).status_code == 200  # the same address
        assert (await _post(url, Host=f"localhost:{port}")).status_code == 200
        assert (await _post(url, Host=f"attacker.example:{port}")).status_code == 421
        assert (await _post(url, Origin="http://attacker.example")).status_code == 403


async def test_the_guard_stands_beside_a_token(sock_127_0_0_2: socket.socket) -> None:
    port = sock_127_0_0_2.getsockname()[1]
    url = f"http://127.0.0.2:{port}/mcp"
    async with serving(sock_127_0_0_2, "127.0.0.2", token="s3cret"):
        assert (await _post(url, Authorization="Bearer s3cret")).status_code == 200
        assert (await _post(url)).status_code == 401
        assert (await _post(url, Host="attacker.example", Authorization="Bearer s3cret")).status_code == 421


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "127.1", "example.com", "::ffff:10.0.0.1"])
async def test_an_address_beyond_this_machine_needs_a_token(host: str) -> None:
    with pytest.raises(UserError, match="bearer token"):
        await serve_http(create_server([shout]), host=host)


async def test_the_bound_socket_decides_not_the_host_argument() -> None:
    sock = _bound(socket.AF_INET, "0.0.0.0")
    with contextlib.closing(sock), pytest.raises(UserError, match=r"0\.0\.0\.0.*bearer token"):
        await serve_http(create_server([shout]), host="127.0.0.1", sock=sock)
