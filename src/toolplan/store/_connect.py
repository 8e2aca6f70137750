"""Reaching a store's database: the engine for a URL, opening (and migrating) it, and this machine's processes."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from .._errors import StoreError, UserError
from . import _schema as t

__all__ = ("HOST", "dead_here", "dialect_insert", "make_engine", "masked", "open_database")

HOST = socket.gethostname()[:60]  # the first part of a store's owner name: runs held on this machine


def make_engine(url: str) -> sa.Engine:
    """The SQLAlchemy engine of a store URL (SQLite or PostgreSQL)."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise UserError(
            f"{url!r} is not a database URL. Use sqlite:///path/to/runs.db or postgresql://user@host:5432/dbname."
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+pysqlite")
        memory = parsed.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"poolclass": sa.pool.StaticPool} if memory else {}
        engine = sa.create_engine(parsed, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA wal_autocheckpoint=0")  # the store's thread checkpoints between writes
            cur.close()

        return engine
    if backend in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            from .._errors import OptionalDependencyError

            raise OptionalDependencyError("A PostgreSQL store", "postgres", package="psycopg") from None
        parsed = parsed.set(drivername="postgresql+psycopg")
        return sa.create_engine(parsed, pool_pre_ping=True)
    raise UserError(
        f"toolplan stores runs in SQLite or PostgreSQL, not {backend!r}: use sqlite:///runs.db or postgresql://..."
    )


def dead_here(owner: str) -> bool:
    """True when ``owner`` names a process of this machine that no longer exists (its lease need not be waited out)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != HOST or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (owned by another user) or cannot be asked
        return False
    return False


def _shown(url: sa.URL) -> str:
    """The URL as the user wrote it (no driver name), password hidden."""
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def masked(url: str) -> str:
    """``url`` with any password hidden."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<invalid url>"


def open_database(engine: sa.Engine) -> None:
    """Reach the database and create or migrate its schema (on the store's thread, on first use)."""
    try:
        _migrate(engine)
    except StoreError:
        raise
    except (sa.exc.SQLAlchemyError, OSError) as exc:
        lines = str(exc).strip().splitlines()
        detail = f"{type(exc).__name__}: {lines[0][:300].rstrip('.')}" if lines else type(exc).__name__
        raise StoreError(
            f"The store at {_shown(engine.url)} could not be opened ({detail}). Check the URL, that the "
            "database server is running, and that the file's folder exists."
        ) from None


def _migrate(engine: sa.Engine) -> None:
    """`migrate`, again after a short wait when SQLite refuses a lock without waiting for it.

    SQLite skips its busy handler where waiting could deadlock (stores opening one new file at once
    may meet there): the migration's transaction is then started again, for at most about 20 s.
    Runs on the store's own thread, so the waits block no event loop.
    """
    for attempt in range(40):
        try:
            t.migrate(engine)
            return
        except sa.exc.OperationalError as exc:
            locked = engine.dialect.name == "sqlite" and "locked" in str(exc.orig)
            if not locked or attempt == 39:
                raise
            time.sleep(min(0.01 * 2**attempt, 0.5))


def dialect_insert(bind: sa.Engine | sa.Connection, table: sa.Table) -> Any:
    """The dialect's ``INSERT`` of ``table`` (it has ``ON CONFLICT ...``)."""
    if bind.dialect.name == "postgresql":
        return pg_dialect.insert(table)
    return sqlite_dialect.insert(table)
