"""A small real HTTP/1.1 server on 127.0.0.1 for the HttpTools tests, with hostile routes.

Runs in the test's own event loop (``asyncio.start_server``), answers one request per connection
and records every request it gets (method, path, headers, body), so a test can
assert that a forbidden target was never contacted.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    port: int
    scheme: str = "http"
    requests: list[Seen] = field(default_factory=list)
    # Set when a streaming route has sent its first chunk: a test waits on it, never on time.
    streaming: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


def _response(status: int, body: bytes = b"", headers: dict[str, str] | None = None, reason: str = "X") -> bytes:
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, target, headers, body


async def _handle(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        method, target, headers, body = await _read_request(reader)
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        writer.close()
        return
    server.requests.append(Seen(method, target, headers, body))
    parts = urlsplit(target)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    path = parts.path
    try:
        if path == "/json":
            writer.write(_response(200, json.dumps({"ok": True, "items": [1, 2, 3]}).encode(),
                                   {"Content-Type": "application/json"}))  # fmt: skip
        elif path == "/text":
            writer.write(_response(200, "héllo".encode(), {"Content-Type": "text/plain; charset=utf-8"}))
        elif path == "/binary":
            writer.write(_response(200, bytes(range(256)), {"Content-Type": "application/octet-stream"}))
        elif path == "/echo":
            echo = {"method": method, "body": body.decode("utf-8", "replace"), "headers": headers, "query": query}
            writer.write(_response(200, json.dumps(echo).encode(), {"Content-Type": "application/json"}))
        elif path == "/status":
            code = int(query.get("code", "500"))
            writer.write(_response(code, b'{"error": "nope"}', {"Content-Type": "application/json"}, "Status"))
        elif path == "/redirect":
            status = int(query.get("status", "302"))
            writer.write(_response(status, b"", {"Location": query["to"]}))
        elif path == "/loop":
            writer.write(_response(302, b"", {"Location": "/loop"}))
        elif path == "/huge":  # an endless body, streamed in chunks
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
            chunk = b"x" * 65536
            while True:
                writer.write(chunk)
                await writer.drain()
                server.streaming.set()
        elif path == "/drip":  # headers, then a body that never ends, one byte at a time
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\n")
            await writer.drain()
            server.streaming.set()
            await asyncio.Event().wait()  # until the client goes away (the test's deadline)
        elif path == "/gzip-bomb":  # 64 MiB of zeros in about 64 KiB
            bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
            writer.write(_response(200, bomb, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}))
        elif path == "/deflate":
            writer.write(_response(200, zlib.compress(b"deflated text"),
                                   {"Content-Type": "text/plain", "Content-Encoding": "deflate"}))  # fmt: skip
        elif path == "/brotli":
            writer.write(_response(200, b"????", {"Content-Type": "text/plain", "Content-Encoding": "br"}))
        else:
            writer.write(_response(404, b"not found", {"Content-Type": "text/plain"}))
        await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def serve(ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """A server on a free port of 127.0.0.1 for the duration of the block."""
    state = Server(port=0, scheme="https" if ssl_context else "http")
    connections: set[asyncio.Task[None]] = set()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await _handle(state, reader, writer)
        finally:
            connections.discard(task)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=ssl_context)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        for task in list(connections):  # the endless routes: their clients have gone
            task.cancel()
        await server.wait_closed()
