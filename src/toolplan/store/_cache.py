"""A `ResultCache`'s entries in the store (`toolplan.execute.CacheStore`): shared by every process on the database.

Each entry is one row keyed by the SHA-256 of the tool and its canonical arguments. A read ignores
expired rows; a write replaces the row and, now and then, deletes rows that expired.
"""

from __future__ import annotations

import sqlalchemy as sa

from . import _schema as t
from ._connect import dialect_insert
from ._db import Database

__all__ = ("cache_get", "cache_put")

_SWEEP_EVERY = 256  # writes between two deletions of expired rows
_writes = 0


async def cache_get(db: Database, key: str, now: float) -> tuple[str, float] | None:
    """The JSON text kept under ``key`` and when it was kept, unless it expired by ``now``."""
    rc = t.result_cache

    def read(engine: sa.Engine) -> tuple[str, float] | None:
        with engine.connect() as conn:
            row = conn.execute(
                sa.select(rc.c.value, rc.c.stored_at).where(rc.c.key == key, rc.c.expires_at > now)
            ).first()
        return None if row is None else (row.value, row.stored_at)

    return await db.read(read)  # type: ignore[no-any-return]


async def cache_put(db: Database, key: str, tool: str, value: str, stored_at: float, expires_at: float) -> None:
    """Keep ``value`` under ``key`` until ``expires_at`` (replacing what was there)."""
    global _writes
    _writes += 1
    sweep = _writes % _SWEEP_EVERY == 0
    rc = t.result_cache

    def write(engine: sa.Engine) -> None:
        with engine.begin() as conn:
            values = {"tool": tool, "value": value, "stored_at": stored_at, "expires_at": expires_at}
            insert = dialect_insert(conn, rc).values(key=key, **values)
            conn.execute(insert.on_conflict_do_update(index_elements=[rc.c.key], set_=values))
            if sweep:
                conn.execute(sa.delete(rc).where(rc.c.expires_at <= stored_at))

    await db.transact(write)
