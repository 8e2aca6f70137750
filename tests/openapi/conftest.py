from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_app import ApiServer, serve_app


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with serve_app() as server:
        yield server
