"""Reads on the service's hot paths (status reads, key checks, listings): where they run.

On SQLite a read runs on the event loop itself: a few indexed rows take microseconds and, in WAL
mode, never wait for the writer, where a hop to a worker thread and back costs more than the read.

PostgreSQL's reads are network round trips: they go to a worker thread (`Database.read`). While the
app runs (its lifespan), they use `Readers`: a pool of its own whose connections are in autocommit
mode, so a statement is one round trip (the store's pool pings each connection it hands out, then
wraps a read in BEGIN and ROLLBACK: three more). Each statement sees the database as committed when
it starts, as in the store's READ COMMITTED transactions. A read that finds its connection broken
(the server restarted) is tried once more, on a fresh one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .._errors import StoreError, ToolplanError
from ..store import Store

__all__ = ("READERS", "Readers", "read")

READERS = 4  # connections of a service's read pool on PostgreSQL (up to twice as many under load)


class Readers:
    """The read pool of a service on PostgreSQL (see the module's text); `close` closes its connections."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = sa.create_engine(
            engine.url,
            isolation_level="AUTOCOMMIT",
            pool_size=READERS,
            max_overflow=READERS,
            pool_reset_on_return=None,  # autocommit: nothing to roll back
        )

    def run(self, fn: Any) -> Any:
        """``fn(engine)`` on a worker thread; again once if its connection was found broken."""
        try:
            return fn(self.engine)
        except sa.exc.DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            return fn(self.engine)  # the pool has dropped its connections: this one is fresh

    def close(self) -> None:
        self.engine.dispose()


async def read(store: Store, fn: Any, readers: Readers | None = None) -> Any:
    """``fn(engine)``, read-only, on the loop (SQLite) or a worker thread; a database failure is a StoreError."""
    db = store.db
    if not db.opened or db.engine.dialect.name != "sqlite":
        if readers is not None and db.opened:
            return await db.read(lambda _engine: readers.run(fn))
        return await db.read(fn)
    try:
        return fn(db.engine)
    except ToolplanError:
        raise
    except Exception as exc:  # the database failed, or holds something no toolplan wrote
        raise StoreError(f"The store failed: {type(exc).__name__}: {exc}") from exc
