"""`LiveServer`: the live page of one local run, on 127.0.0.1, with the planner service's routes.

It answers the few routes the page uses, in the service's shapes, so one page serves both:

- ``GET /ui/executions/{id}`` the page, ``GET /ui/static/{name}`` its files (no key);
- ``GET /v1/executions/{id}``, ``/v1/executions/{id}/graph`` and ``/v1/executions/{id}/events``
  (server-sent events with ids; ``Last-Event-ID`` or ``?after=N`` resumes), each with ``X-API-Key``.

The key is a random token made for this run and given to the page in the address's fragment
(``#key=...``), which browsers never send to a server; other users of the machine, and other web
pages, cannot read the run without it. The standard library's threaded HTTP server runs in one
thread that `LiveServer` owns: leaving the ``with`` block stops it and waits for every request
thread (open event streams end first).

A request's line and headers must arrive within ``head_timeout`` seconds in all (a client trickling
bytes is cut off, not only one that goes quiet); closing shuts the connections still sending their
request at once, and any other left after a short grace, so a stalled client never holds the exit.
"""

from __future__ import annotations

import contextlib
import hmac
import http.server
import io
import re
import secrets
import socket
import threading
import time
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .._json import dumps
from ._assets import PAGE_HEADERS, asset, page
from ._feed import LiveFeed

__all__ = ("LiveServer",)

_API = re.compile(r"^/v1/executions/(?P<id>[^/]+)(?P<rest>/graph|/events)?$")
_PING = 15.0  # seconds between comments on a quiet event stream (as the service's)
_HEAD_TIMEOUT = 10.0  # seconds a client has to send its request line and headers, in all
_IDLE_TIMEOUT = 30.0  # seconds one read or write of a connection may wait
_CLOSE_GRACE = 2.0  # seconds closing waits for responses under way before cutting their connections


class LiveServer:
    """Serves ``feed``'s run on ``host:port`` (port 0: a free one) while the ``with`` block lasts.

    Attributes:
        url: The page's address, with the key in its fragment: open it in a browser.
        key: The token the API routes want in ``X-API-Key``.
    """

    def __init__(
        self, feed: LiveFeed, *, host: str = "127.0.0.1", port: int = 0, head_timeout: float = _HEAD_TIMEOUT
    ) -> None:
        self.feed = feed
        self.key = secrets.token_urlsafe(24)
        self.head_timeout = head_timeout
        self._httpd = _Server((host, port), _Handler)
        self._httpd.live = self
        shown = f"[{host}]" if ":" in host else host
        self.origin = f"http://{shown}:{self._httpd.server_address[1]}"
        self.url = f"{self.origin}/ui/executions/{feed.run_id}#key={self.key}"
        self._thread = threading.Thread(target=self._serve, name="toolplan:live-ui", daemon=True)

    def _serve(self) -> None:
        self._httpd.serve_forever(poll_interval=0.1)  # how soon close() is noticed

    def __enter__(self) -> LiveServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving: end the event streams, stop accepting, wait for the request threads."""
        self.feed.close()
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.cut(reading_only=True)  # still sending a request (or nothing): nothing to finish
        self._httpd.settle(_CLOSE_GRACE)  # responses under way (event streams end with the feed)
        self._httpd.cut(reading_only=False)
        self._httpd.server_close()  # joins the request threads (block_on_close)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False  # owned: server_close() waits for them
    block_on_close = True
    live: LiveServer

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.connections: dict[socket.socket, bool] = {}  # each open connection: still reading its request?
        self.changed = threading.Condition()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.changed:
            self.connections[request] = True
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.changed:
            self.connections.pop(request, None)
            self.changed.notify_all()
        super().shutdown_request(request)

    def responding(self, request: socket.socket) -> None:
        with self.changed:
            if request in self.connections:
                self.connections[request] = False

    def settle(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the open connections to end."""
        with self.changed:
            self.changed.wait_for(lambda: not self.connections, timeout=seconds)

    def cut(self, *, reading_only: bool) -> None:
        """Shut the open connections (those still reading a request, or all): their threads end at once."""
        with self.changed:
            chosen = [conn for conn, reading in self.connections.items() if reading or not reading_only]
        for conn in chosen:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _HeadReader(io.RawIOBase):
    """A connection's reads, each bounded by what is left of the time its request head may take."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline: float | None = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request's line and headers took too long")
            self.sock.settimeout(min(left, _IDLE_TIMEOUT))
        return self.sock.recv_into(buffer)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing idles in a keep-alive read
    timeout = _IDLE_TIMEOUT  # a client that sends nothing is let go
    _head: _HeadReader

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain reader: replaced by one with the head's deadline
        self._head = _HeadReader(self.connection, time.monotonic() + self.server.live.head_timeout)
        self.rfile = io.BufferedReader(self._head)

    def parse_request(self) -> bool:
        ok = super().parse_request()  # reads the headers
        self._head.deadline = None  # the head is in: the response may take its time
        self.connection.settimeout(_IDLE_TIMEOUT)
        self.server.responding(self.connection)
        return ok

    def version_string(self) -> str:
        return "toolplan"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the run, not the page's requests."""

    def do_GET(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the page went away
            self._route()

    def _route(self) -> None:
        live = self.server.live
        parts = urlsplit(self.path)
        path = parts.path
        if path in ("/", "/ui", "/ui/"):
            self._send(302, b"", "text/plain", {"Location": f"/ui/executions/{live.feed.run_id}"})
        elif path.startswith("/ui/executions/"):
            self._send(200, page(), "text/html; charset=utf-8", PAGE_HEADERS)
        elif path.startswith("/ui/static/"):
            found = asset(path.removeprefix("/ui/static/"))
            if found is None:
                self._error(404, "not_found", f"No file {path!r} here: the page's files are under /ui/static/.")
            else:
                self._send(200, found[0], found[1], PAGE_HEADERS)
        elif path == "/healthz":
            self._json(200, {"status": "ok"})
        elif (m := _API.match(path)) is not None:
            if not self._authorized():
                return
            if m["id"] != live.feed.run_id:
                self._error(
                    404,
                    "run_not_found",
                    f"No execution {m['id']!r} here: this server shows run {live.feed.run_id!r}.",
                )
            elif m["rest"] == "/graph":
                self._json(200, live.feed.graph)
            elif m["rest"] == "/events":
                self._events(parts.query)
            else:
                self._json(200, live.feed.execution())
        else:
            self._error(404, "not_found", f"No route {path!r}: open /ui/executions/{live.feed.run_id}.")

    def _authorized(self) -> bool:
        given = self.headers.get("X-API-Key") or ""
        if hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self.server.live.key.encode()):
            return True
        self._error(
            401,
            "unauthorized",
            "Send this run's key in the X-API-Key header: it is in the fragment (#key=...) of the address "
            "`toolplan run --ui` printed.",
        )
        return False

    def _events(self, query: str) -> None:
        try:
            last = self.headers.get("Last-Event-ID")
            after = int(last) if last is not None else int((parse_qs(query).get("after") or ["0"])[0])
            if after < 0:
                raise ValueError
        except ValueError:
            self._error(400, "invalid_request", "Last-Event-ID and after take an event number, 0 or more.")
            return
        self.send_response(200)
        for name, value in (("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")):
            self.send_header(name, value)
        self.end_headers()
        feed = self.server.live.feed
        while True:
            records, ended = feed.wait(after, _PING)
            if not records and not ended:
                self.wfile.write(b": ping\n\n")
            for r in records:
                after = r["seq"]
                self.wfile.write(f"id: {after}\nevent: {r['type']}\ndata: {dumps(r)}\n\n".encode())
            self.wfile.flush()
            if ended:
                return

    def _json(self, status: int, body: Any) -> None:
        self._send(status, dumps(body).encode(), "application/json", {"Cache-Control": "no-store"})

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"code": code, "message": message, "details": None})

    def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
