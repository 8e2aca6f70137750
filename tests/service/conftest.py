"""Fixtures of the service tests (the servers themselves are in svc_support.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from svc_support import ProcessServer, ThreadServer


@pytest.fixture
def gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The gate directory (``gate`` tools wait for a file here) and the ledger ($SVC_LEDGER)."""
    directory = tmp_path / "gates"
    directory.mkdir()
    monkeypatch.setenv("SVC_GATES", str(directory))
    monkeypatch.setenv("SVC_LEDGER", str(tmp_path / "ledger.txt"))
    return directory


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def server(db_url: str, gates: Path) -> Iterator[ThreadServer]:
    s = ThreadServer(db_url).start()
    yield s
    s.stop()


@pytest.fixture
def process_env(gates: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TOOLPLAN_LEASE"] = "2"
    return env


@pytest.fixture
def thread_server(gates: Path) -> Iterator[Callable[..., ThreadServer]]:
    """Start `ThreadServer` s (``thread_server(db_url, model=..., config=...)``); each is stopped after the test."""
    started: list[ThreadServer] = []

    def start(db_url: str, **options: Any) -> ThreadServer:
        server = ThreadServer(db_url, **options)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """An ``--api-key-file`` with one key (`ProcessServer.key`)."""
    path = tmp_path / "keys.txt"
    path.write_text(f"tpk_test_{os.urandom(16).hex()}\n")
    return path


@pytest.fixture
def spawn(key_file: Path, process_env: dict[str, str]) -> Iterator[Callable[..., ProcessServer]]:
    """Start ``toolplan serve`` processes (``spawn(db_url, *options)``); each is stopped after the test."""
    started: list[ProcessServer] = []

    def start(db_url: str, *args: str) -> ProcessServer:
        server = ProcessServer(db_url, key_file, process_env, list(args))
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
