"""Fixtures of the service tests (the servers themselves are in svc_support.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from svc_support import ThreadServer


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
