"""A local client that trickles bytes, or sends nothing, neither holds `LiveServer` open nor the exit."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ui_support import live_run

from toolplan._ui import LiveFeed, LiveServer
from toolplan.plan import validate_plan

PLAN = {"steps": [{"id": "a", "tool": "t", "arguments": {}}]}


def _server(head_timeout: float = 10.0) -> LiveServer:
    compiled = validate_plan(PLAN).compiled
    assert compiled is not None
    return LiveServer(LiveFeed("run1", compiled), head_timeout=head_timeout)


def _address(server: LiveServer) -> tuple[str, int]:
    host, port = server.origin.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@contextlib.contextmanager
def trickling(server: LiveServer) -> Iterator[threading.Event]:
    """A connection sending its request head a byte every 50 ms (for minutes); the event is set when cut off."""
    sock = socket.create_connection(_address(server))
    stop, cut = threading.Event(), threading.Event()

    def trickle() -> None:
        sent = 0
        head = b"GET /healthz HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 100_000
        try:
            while not stop.wait(0.05) and sent < len(head):
                sock.sendall(head[sent : sent + 1])
                sent += 1
        except OSError:  # the server shut the connection
            cut.set()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield cut
    finally:
        stop.set()
        thread.join(30)
        sock.close()


def test_closing_does_not_wait_for_a_client_trickling_its_request() -> None:
    server = _server()
    with server, trickling(server), contextlib.closing(socket.create_connection(_address(server))):  # one idle
        assert httpx.get(f"{server.origin}/healthz", timeout=30).json() == {"status": "ok"}  # others are served
        closing = threading.Thread(target=server.close)
        closing.start()
        closing.join(60)  # the trickle would last minutes: an ended close means it was not waited for
        assert not closing.is_alive()


def test_a_request_head_has_a_deadline_however_it_trickles() -> None:
    server = _server(head_timeout=0.5)
    with server, trickling(server) as cut:
        assert cut.wait(60)  # cut off long before the trickle ends (each byte keeps the socket busy)
        assert httpx.get(f"{server.origin}/healthz", timeout=30).json() == {"status": "ok"}


@pytest.mark.slow  # a subprocess that imports toolplan
def test_toolplan_run_ui_keep_0_exits_while_a_client_trickles(gates: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"steps": [{"id": "wait", "tool": "gate", "arguments": {"name": "go"}}]}))
    with live_run(plan, gates, "--ui-keep", "0") as run:
        host, port = re.match(r"http://([\d.]+):(\d+)/", run.url).groups()  # type: ignore[union-attr]
        sock = socket.create_connection((host, int(port)))
        stop = threading.Event()

        def trickle() -> None:
            with contextlib.suppress(OSError):  # until the server shuts the connection
                sock.sendall(b"GET /healthz HTTP/1.0\r\n")
                while not stop.wait(0.05):
                    sock.sendall(b"a")

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            (gates / "go").touch()  # the run ends; with --ui-keep 0 the command exits at once
            assert run.process.wait(60) == 0
        finally:
            stop.set()
            thread.join(30)
            sock.close()
