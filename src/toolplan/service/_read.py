"""Reads on the service's hot paths (status reads, key checks, listings): where they run.

On SQLite a read runs on the event loop itself: a few indexed rows take microseconds and, in WAL
mode, never wait for the writer, where a hop to a worker thread and back costs more than the read.
PostgreSQL's reads are network round trips: they go to a worker thread (`Database.read`).
"""

from __future__ import annotations

from typing import Any

from .._errors import StoreError, ToolplanError
from ..store import Store

__all__ = ("read",)


async def read(store: Store, fn: Any) -> Any:
    """``fn(engine)``, read-only, on the loop (SQLite) or a worker thread; a database failure is a StoreError."""
    db = store.db
    if not db.opened or db.engine.dialect.name != "sqlite":
        return await db.read(fn)
    try:
        return fn(db.engine)
    except ToolplanError:
        raise
    except Exception as exc:  # the database failed, or holds something no toolplan wrote
        raise StoreError(f"The store failed: {type(exc).__name__}: {exc}") from exc
