"""A `ToolPolicy`'s statistics in the store (`toolplan.policy.StatsStore`): shared by every process on the database.

Each update reads the row, decays it to the observation's time, adds the observation and writes it
back only if the row still holds what was read (else it reads again), so concurrent workers never
lose each other's observations.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .._errors import StoreError
from ..policy import ArmStats, Observation
from . import _schema as t
from ._connect import dialect_insert
from ._db import Database

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


async def load_tool_stats(db: Database, group: str) -> dict[str, ArmStats]:
    """The stored statistics of ``group``'s tools (as last updated)."""
    ts = t.tool_stats

    def read(engine: sa.Engine) -> dict[str, ArmStats]:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(ts).where(ts.c.group_name == group))
            return {row.tool: _arm(row) for row in rows}

    return await db.read(read)  # type: ignore[no-any-return]


async def record_tool_stats(
    db: Database, group: str, tool: str, observation: Observation, half_life: float | None
) -> None:
    """Add ``observation`` to ``(group, tool)``: read, decay, and write back only if nobody wrote in between.

    A compare-and-set on the values read (no lock held across the read, which SQLite's driver would
    not take): a write that lost the race reads again and retries.
    """
    ts = t.tool_stats
    key = (ts.c.group_name == group) & (ts.c.tool == tool)

    def write(engine: sa.Engine) -> bool:
        with engine.begin() as conn:
            row = conn.execute(sa.select(ts).where(key)).first()
            arm = (ArmStats() if row is None else _arm(row)).add(observation, half_life)
            values = {
                "n": arm.n,
                "reward": arm.reward,
                "successes": arm.successes,
                "latency": arm.latency,
                "cost": arm.cost,
                "updated_at": arm.updated_at,
            }
            if row is None:  # RETURNING: a row back only if this insert made it (rowcount may be -1 here)
                insert = dialect_insert(conn, ts).values(group_name=group, tool=tool, **values)
                return conn.execute(insert.on_conflict_do_nothing().returning(ts.c.tool)).first() is not None
            unchanged = key & (ts.c.n == row.n) & (ts.c.reward == row.reward) & (ts.c.updated_at == row.updated_at)
            return (
                conn.execute(sa.update(ts).where(unchanged).values(**values).returning(ts.c.tool)).first() is not None
            )

    for _attempt in range(_TRIES):
        if await db.transact(write):
            return
    raise StoreError(
        f"The statistics of tool {tool!r} in group {group!r} changed under every one of {_TRIES} writes; "
        "the observation was not stored. Too many processes update one tool at once: try again later."
    )


_TRIES = 100
