"""A real HTTP server on 127.0.0.1 that answers with canned provider responses and records requests.

It speaks whatever the canned responses say: OpenAI chat-completions JSON or SSE, Anthropic
messages JSON or SSE. Each request takes the next canned response; none left is a 599 answer
(which fails the test loudly, since it is neither retried nor expected).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Canned:
    """One answer: a JSON body, or a list of SSE events (already formatted), or a hang."""

    status: int = 200
    body: Any = None
    sse: list[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def openai_sse(chunks: list[dict[str, Any]]) -> list[str]:
    return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


def anthropic_sse(events: list[dict[str, Any]]) -> list[str]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._canned: deque[Canned] = deque()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *canned: Canned) -> None:
        with self._lock:
            self._canned.extend(canned)

    @property
    def unused(self) -> int:
        return len(self._canned)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection; the body ends at close

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with provider._lock:
                    provider.requests.append(
                        Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    canned = provider._canned.popleft() if provider._canned else None
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(canned)

            def _answer(self, canned: Canned | None) -> None:
                if canned is None:
                    self._json(599, {"error": {"message": "FakeProvider has no canned response left"}})
                    return
                if canned.hang:
                    provider._release.wait()
                    return
                if canned.sse is not None:
                    self.send_response(canned.status)
                    self.send_header("content-type", "text/event-stream")
                    for k, v in canned.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for event in canned.sse:
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                    return
                self._json(canned.status, canned.body, canned.headers)

            def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextlib.contextmanager
def fake_provider() -> Iterator[FakeProvider]:
    server = FakeProvider()
    server.start()
    try:
        yield server
    finally:
        server.stop()
