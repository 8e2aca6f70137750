from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from toolplan.testing import LocalLlamaServer, find_smollm2_gguf, local_llama_server

POSTGRES_URL = os.environ.get("TOOLPLAN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _unavailable(reason: str) -> None:
    # CI installs the local model (scripts/test.sh): there a missing piece is a failure, not a skip.
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the local-model tests)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LocalLlamaServer]:
    """SmolLM2-135M-Instruct behind `python -m llama_cpp.server` on a free loopback port."""
    if importlib.util.find_spec("llama_cpp") is None:
        _unavailable('llama-cpp-python is not installed: pip install "toolplan[local]"')
    try:
        find_smollm2_gguf()
    except Exception as exc:
        _unavailable(str(exc))
    with local_llama_server() as server:
        yield server


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped after it), as a URL.

    The server comes from ``TOOLPLAN_TEST_POSTGRES_URL`` (default: postgres@127.0.0.1:5432/test).
    Without a server the test is skipped, except under ``CI=true``, where it fails.
    """
    try:
        import psycopg
    except ImportError:
        _unavailable('psycopg is not installed: pip install "toolplan[postgres]"')
    import sqlalchemy as sa

    base = sa.make_url(POSTGRES_URL)
    name = f"tp_{os.urandom(6).hex()}"
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        _unavailable(
            f"no PostgreSQL server at {base.render_as_string()} ({str(exc).strip()[:120]}). Start one, or set "
            "TOOLPLAN_TEST_POSTGRES_URL to a server where the tests may create databases."
        )
    with conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
