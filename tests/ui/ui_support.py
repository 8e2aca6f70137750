"""Helpers of the live-view tests: the plan they run, a headless Chromium, the service in a thread,
``toolplan run --ui`` in a subprocess. (A uniquely named module; conftest.py holds the fixtures.)"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHROMIUM = os.environ.get("TOOLPLAN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# Screenshots the browser tests keep (a CI artefact); $TOOLPLAN_UI_ARTIFACTS moves them.
ARTIFACTS = Path(os.environ.get("TOOLPLAN_UI_ARTIFACTS") or REPO / "build" / "ui-artifacts")
# With TOOLPLAN_UPDATE_DOCS=1 the tests also write the pictures the docs show (docs/*.png, docs/*.svg).
UPDATE_DOCS = os.environ.get("TOOLPLAN_UPDATE_DOCS", "") == "1"

# Three searches in parallel; two feed a summary and its report; the third fails, so the step that
# needs it is skipped. Every gated step waits for the test to open its gate.
PLAN: dict[str, Any] = {
    "steps": [
        {"id": "search_web", "tool": "gate", "arguments": {"name": "web"}},
        {"id": "search_docs", "tool": "gate", "arguments": {"name": "docs"}},
        {
            "id": "fetch_prices",
            "tool": "gate_fail",
            "arguments": {"name": "prices", "message": "The price API answered 503: try again in a minute."},
        },
        {"id": "summarise", "tool": "combine", "arguments": {"parts": ["$ref:search_web", "$ref:search_docs"]}},
        {"id": "compare", "tool": "combine", "arguments": {"parts": ["$ref:fetch_prices", "$ref:summarise"]}},
        {"id": "report", "tool": "combine", "arguments": {"parts": ["$ref:summarise"]}},
    ]
}


def unavailable(reason: str) -> None:
    """Skip, except under CI (scripts/test.sh installs Chromium and Playwright): there, fail."""
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


def chromium_or_skip() -> str:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        unavailable(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set TOOLPLAN_CHROMIUM)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        unavailable("the Playwright package is not installed: pip install playwright")
    return CHROMIUM


def keep_screenshot(page: Any, name: str, *, docs: bool = False) -> Path:
    """Save a screenshot of ``page`` among the artefacts (and, with ``docs``, in docs/ when asked to)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    if docs and UPDATE_DOCS:
        shutil.copyfile(path, REPO / "docs" / name)
    return path


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@dataclass
class ServiceThread:
    """The planner service (`create_app`) under uvicorn in a thread, on 127.0.0.1, with one API key."""

    db_url: str
    key: str = ""
    url: str = ""
    _server: Any = None
    _thread: threading.Thread | None = None

    def start(self) -> ServiceThread:
        import uvicorn
        from ui_tools import TOOLS

        from toolplan.service import Service, ServiceConfig, create_app
        from toolplan.service._store import ServiceStore
        from toolplan.store import open_store

        sock = free_socket()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        ready = threading.Event()

        # All in the server's thread: this one may hold Playwright's event loop.
        def run() -> None:
            async def main() -> None:
                store = open_store(self.db_url, lease=2.0)
                self.key = (await ServiceStore(store).create_key("ui-test"))[1]
                service = Service(store, TOOLS, config=ServiceConfig(poll_interval=0.05))
                # a browser's open event stream would hold a stop for ever without a grace limit (a stop
                # from this thread is no signal, so the streams are not told the server is going)
                config = uvicorn.Config(create_app(service), log_level="warning", timeout_graceful_shutdown=1)
                self._server = uvicorn.Server(config)
                ready.set()
                try:
                    await self._server.serve(sockets=[sock])
                finally:
                    await store.close()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the service did not start within 30 s")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)


@dataclass
class LiveRun:
    """``toolplan run PLAN --tools ui_tools.py --ui`` in a subprocess; ``url`` is the page it printed."""

    process: subprocess.Popen[str]
    url: str
    lines: queue.Queue[str | None]
    stderr: list[str] = field(default_factory=list[str])

    def wait_for(self, text: str) -> None:
        """Wait until a line of standard error holds ``text``."""
        while not any(text in line for line in self.stderr):
            line = self.lines.get(timeout=60)
            if line is None:
                raise AssertionError(f"toolplan run ended before printing {text!r}:\n{''.join(self.stderr)}")
            self.stderr.append(line)

    def interrupt(self) -> tuple[int, str, str]:
        """Ctrl-C (the page stops): the exit code, standard output and standard error."""
        self.process.send_signal(signal.SIGINT)
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        self.process.wait(60)
        while (line := self.lines.get(timeout=30)) is not None:
            self.stderr.append(line)
        return self.process.returncode, out, "".join(self.stderr)


@contextmanager
def live_run(plan_path: Path, gates: Path, *extra: str) -> Iterator[LiveRun]:
    """Start the run and wait for its page's address (the first line of stderr that holds one)."""
    command = [sys.executable, "-m", "toolplan.cli", "run", str(plan_path), "--tools", str(HERE / "ui_tools.py")]
    env = {**os.environ, "UI_GATES": str(gates), "PYTHONIOENCODING": "utf-8"}
    process = subprocess.Popen(
        [*command, "--ui", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    url = None
    try:
        while url is None:
            line = lines.get(timeout=60)
            if line is None:
                process.wait(30)
                raise AssertionError(f"toolplan run --ui ended without a page address:\n{''.join(seen)}")
            seen.append(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/\S+", line)
            url = found.group(0) if found else None
        yield LiveRun(process, url, lines, seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        reader.join(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
