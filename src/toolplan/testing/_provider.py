"""`FakeProvider`: a real HTTP server on 127.0.0.1 that answers like a model provider, from a script.

Point a real provider client at it (``OPENAI_BASE_URL=provider.url + "/v1"``, or ``base_url=...``)
and the code under test goes through the same SDK, HTTP and parsing a real model does. Each
request takes the next `Canned` answer; none left is a 599 answer, which fails the caller loudly
(it is neither retried nor expected). Every request is recorded in ``provider.requests``.

```python
from toolplan.models import OpenAIModel
from toolplan.testing import Canned, FakeProvider, openai_tool_call

with FakeProvider() as provider:
    provider.queue(Canned(body=openai_tool_call("get_weather", {"city": "Paris"})))
    model = OpenAIModel("scripted", base_url=provider.url + "/v1", api_key="test")
    ...  # run the agent; then look at provider.requests[0].body
```
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = (
    "Canned",
    "FakeProvider",
    "ProviderRequest",
    "anthropic_sse",
    "openai_sse",
    "openai_text",
    "openai_tool_call",
)


@dataclass
class Canned:
    """One scripted answer of a `FakeProvider`.

    Attributes:
        status: The HTTP status.
        body: A JSON body (used when ``sse`` is None).
        sse: Server-sent events, each already formatted (`openai_sse`, `anthropic_sse`), sent in order.
        headers: Extra response headers (``Retry-After``, say).
        hang: Never answer (until the provider stops): a model that does not respond.
    """

    status: int = 200
    body: Any = None
    sse: list[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass
class ProviderRequest:
    """A request a `FakeProvider` received: ``headers`` have lower-case names, ``body`` is parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def openai_sse(chunks: Sequence[Mapping[str, Any]]) -> list[str]:
    """OpenAI chat-completion chunks as server-sent events, ending with ``data: [DONE]``."""
    return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


def anthropic_sse(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Anthropic message-stream events as server-sent events (each named by its ``type``)."""
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]


def _completion(message: dict[str, Any], finish: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def openai_tool_call(
    name: str, arguments: str | Mapping[str, Any], *, call_id: str = "call_1", model: str = "fake"
) -> dict[str, Any]:
    """The JSON body of an OpenAI chat completion whose answer is one call of tool ``name``.

    Args:
        name: The tool the model calls.
        arguments: Its arguments: JSON text as the model wrote it (which may be invalid on
            purpose), or a mapping (dumped to JSON).
        call_id: The call's id (a tool message answers it by this id).
        model: The model name the answer gives.
    """
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
    return _completion({"content": None, "tool_calls": [call]}, "tool_calls", model)


def openai_text(content: str, *, model: str = "fake") -> dict[str, Any]:
    """The JSON body of an OpenAI chat completion whose answer is the text ``content``."""
    return _completion({"content": content}, "stop", model)


class FakeProvider:
    """A model provider on 127.0.0.1 that answers from a script and records what it was sent.

    It speaks whatever the canned answers say: OpenAI chat-completions JSON or SSE, Anthropic
    messages JSON or SSE; the path is not looked at. Use it as a context manager (or `start` and
    `stop`); ``url`` is ``http://127.0.0.1:PORT`` (the OpenAI SDK wants ``url + "/v1"``).
    """

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []
        self._canned: deque[Canned] = deque()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        """The server's address, ``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *canned: Canned) -> None:
        """Add answers; each request takes the next one."""
        with self._lock:
            self._canned.extend(canned)

    @property
    def unused(self) -> int:
        """How many queued answers no request has taken."""
        with self._lock:
            return len(self._canned)

    def start(self) -> FakeProvider:
        """Start serving (in a thread of this process)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; a `Canned` ``hang`` answer is let go."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _take(self, request: ProviderRequest) -> Canned | None:
        with self._lock:
            self.requests.append(request)
            return self._canned.popleft() if self._canned else None

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
                headers = {k.lower(): v for k, v in self.headers.items()}
                canned = provider._take(ProviderRequest("POST", self.path, headers, body))
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
