"""A real uvicorn server on 127.0.0.1 for the service tests: in a thread of this process, or as a
``toolplan serve`` subprocess (for kill -9 and restarts). Imported as ``svc_support`` (a name no other
test folder uses, unlike ``conftest``)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from toolplan.models import Model
from toolplan.service import Service, ServiceConfig, create_app
from toolplan.service._store import ServiceStore
from toolplan.store import open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from svc_tools import TOOLS  # noqa: E402


def make_key(url: str, name: str = "test") -> str:
    async def go() -> str:
        async with open_store(url) as store:
            _, secret = await ServiceStore(store).create_key(name)
            return secret

    return asyncio.run(go())


@dataclass
class ThreadServer:
    """`create_app(Service(...))` under uvicorn in a thread; ``url`` and a ``client`` with a key."""

    db_url: str
    model: Model | str | None = None
    config: ServiceConfig = field(default_factory=lambda: ServiceConfig(poll_interval=0.05))
    tools: Any = None  # an async function of the store returning the tools (default: svc_tools.TOOLS)
    key: str = ""
    url: str = ""
    _server: Any = None
    _thread: threading.Thread | None = None

    def start(self) -> ThreadServer:
        if not self.key:
            self.key = make_key(self.db_url)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts (none is refused)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        ready = threading.Event()

        def run() -> None:
            async def main() -> None:
                store = open_store(self.db_url, lease=2.0)
                tools = TOOLS if self.tools is None else await self.tools(store)
                service = Service(store, tools, model=self.model, config=self.config)
                config = uvicorn.Config(
                    create_app(service), log_level="warning", lifespan="on", timeout_graceful_shutdown=1
                )
                self._server = uvicorn.Server(config)
                ready.set()
                try:
                    await self._server.serve(sockets=[sock])
                finally:
                    await store.close()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def client(self, *, key: str | None = None) -> httpx.Client:
        headers = {"X-API-Key": self.key if key is None else key}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)


@dataclass
class ProcessServer:
    """``toolplan serve`` in a subprocess (killable with SIGKILL); ``args`` are more options (``--model``...).

    Its stderr goes to ``log`` (a file: a pipe nobody reads would fill up and stop the server).
    """

    db_url: str
    key_file: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def key(self) -> str:
        """The first key of ``key_file``."""
        return self.key_file.read_text().split()[0]

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": self.key}, timeout=30)

    def start(self) -> ProcessServer:
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        command = [sys.executable, "-m", "toolplan", "serve", "--tools", str(HERE / "svc_tools.py"), "--db"]
        command += [self.db_url, "--port", str(self.port), "--api-key-file", str(self.key_file), *self.args]
        self.log = self.key_file.parent / f"serve-{self.port}-{os.urandom(3).hex()}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        with httpx.Client(timeout=1) as c:
            for _ in range(600):  # up to a minute for the process to import and bind
                if self.process.poll() is not None:
                    raise RuntimeError(f"toolplan serve exited: {self.stderr()[-2000:]}")
                try:
                    if c.get(f"{self.url}/healthz").status_code == 200:
                        return self
                except httpx.TransportError:
                    threading.Event().wait(0.1)
        raise RuntimeError("toolplan serve did not answer within a minute")

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        return self.log.read_text(errors="replace") if self.log is not None and self.log.exists() else ""

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
