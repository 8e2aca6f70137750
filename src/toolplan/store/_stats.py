"""A `ToolPolicy`'s statistics in the store (`toolplan.policy.StatsStore`): shared by every process on the database.

Each update reads the row, decays it to the observation's time and adds the observation, in one
transaction that holds the row (SQLite: the store's one writer; PostgreSQL: ``SELECT ... FOR
UPDATE``), so concurrent workers never lose each other's observations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..policy import ArmStats, Observation
from . import _schema as t

if TYPE_CHECKING:
    from ._sql import Store

__all__ = ("load_tool_stats", "record_tool_stats")


def _arm(row: Any) -> ArmStats:
    return ArmStats(
        n=row.n,
        reward=row.reward,
        successes=row.successes,
        latency=row.latency,
        cost=row.cost,
        updated_at=row.updated_at,
    )


async def load_tool_stats(store: Store, group: str) -> dict[str, ArmStats]:
    """The stored statistics of ``group``'s tools (as last updated)."""
    ts = t.tool_stats

    def read(engine: sa.Engine) -> dict[str, ArmStats]:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(ts).where(ts.c.group_name == group))
            return {row.tool: _arm(row) for row in rows}

    return await store.db.read(read)  # type: ignore[no-any-return]


async def record_tool_stats(
    store: Store, group: str, tool: str, observation: Observation, half_life: float | None
) -> None:
    """Add ``observation`` to ``(group, tool)``: read, decay and write back in one transaction."""
    ts = t.tool_stats
    key = (ts.c.group_name == group) & (ts.c.tool == tool)

    def write(engine: sa.Engine) -> bool:
        with engine.begin() as conn:
            query = sa.select(ts).where(key)
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            row = conn.execute(query).first()
            arm = (ArmStats() if row is None else _arm(row)).add(observation, half_life)
            values = {
                "n": arm.n,
                "reward": arm.reward,
                "successes": arm.successes,
                "latency": arm.latency,
                "cost": arm.cost,
                "updated_at": arm.updated_at,
            }
            if row is not None:
                conn.execute(sa.update(ts).where(key).values(**values))
                return True
            insert = _insert(conn, ts).values(group_name=group, tool=tool, **values)
            # False: another process made the row between the read and the insert: add to it under its lock.
            return bool(conn.execute(insert.on_conflict_do_nothing()).rowcount)

    for _attempt in range(3):
        if await store.db.transact(write):
            return


def _insert(conn: sa.Connection, table: sa.Table) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)
