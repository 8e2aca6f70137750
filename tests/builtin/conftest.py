from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from http_server import Server, serve


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serve() as state:
        yield state


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path
