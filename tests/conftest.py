from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

import toolplan
from toolplan.testing import LocalLlamaServer, find_smollm2_gguf, local_llama_server

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
POSTGRES_ENV = "TOOLPLAN_TEST_POSTGRES_URL"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_example(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run a script of the repository (``"examples/x/y.py"``) in a Python process of its own, in ``tmp_path``.

    The process imports the toolplan these tests import; a script that exits with an error fails the test
    with its output.
    """
    src = str(Path(toolplan.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}

    def run(path: str, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, str(REPO / path), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{path} exited with {done.returncode}:\n{done.stdout}{done.stderr}"
        return done

    return run


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


def _no_postgres(reason: str) -> NoReturn:
    """Skip, with how to enable the tests; under CI (``CI=true``) a missing server is a failure instead."""
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason} (CI=true: the PostgreSQL tests must run)")
    pytest.skip(
        f"{reason}. To run the PostgreSQL tests, start a server and set {POSTGRES_ENV} to a URL of a database "
        f"whose user may CREATE DATABASE (default {DEFAULT_POSTGRES_URL}), and pip install 'toolplan[postgres]'."
    )


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database (``tp_<random>``), dropped after the test.

    The server is the one of ``$TOOLPLAN_TEST_POSTGRES_URL`` (default
    ``postgresql://postgres@127.0.0.1:5432/test``); its database is only used to create and drop
    the test's own. Skips when the server cannot be reached (fails when ``CI=true``).
    """
    import sqlalchemy as sa

    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        _no_postgres("psycopg is not installed")
    admin = sa.make_url(os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES_URL)
    if admin.get_backend_name() not in ("postgresql", "postgres"):
        pytest.fail(f"{POSTGRES_ENV} must be a postgresql:// URL, not {admin.render_as_string(hide_password=True)!r}")
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    shown = admin.render_as_string(hide_password=True)
    name = f"tp_{secrets.token_hex(6)}"
    try:
        conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split())[:200]
        _no_postgres(f"PostgreSQL at {shown} cannot be reached ({type(exc).__name__}: {detail})")
    try:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield admin.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
        finally:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    finally:
        conn.close()
