"""A `ToolPolicy`'s statistics in the store (`toolplan.policy.StatsStore`): shared by every process on the database.

Also the tools' latencies a dry run reads (`toolplan.execute.LatencyStats`): from the steps of stored
runs, else from those statistics.

Each update reads the row, decays it to the observation's time, adds the observation and writes it
back only if the row still holds what was read (else it reads again), so concurrent workers never
lose each other's observations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from .._errors import StoreError
from ..execute import ToolLatency
from ..policy import ArmStats, Observation
from . import _schema as t
from ._connect import dialect_insert
from ._db import Database

__all__ = ("load_tool_stats", "record_tool_stats", "tool_latencies")


_ARM_COLUMNS = tuple(f.name for f in dataclasses.fields(ArmStats))  # tool_stats has a column per field


def _arm(row: Any) -> ArmStats:
    return ArmStats(**{c: getattr(row, c) for c in _ARM_COLUMNS})


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
            values = {c: getattr(arm, c) for c in _ARM_COLUMNS}
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


async def tool_latencies(db: Database, tools: Sequence[str]) -> dict[str, ToolLatency]:
    """Mean seconds of each of ``tools``' calls: steps of stored runs that succeeded with it, without a fallback.

    A tool no stored step called is looked up in the policies' statistics (kept for the members of
    groups); a tool in neither is left out.
    """
    st, ts = t.steps, t.tool_stats
    names = sorted(set(tools))

    def read(engine: sa.Engine) -> dict[str, ToolLatency]:
        out: dict[str, ToolLatency] = {}
        if not names:
            return out
        with engine.connect() as conn:
            seconds = st.c.ended_at - st.c.started_at
            rows = conn.execute(
                sa.select(st.c.call_tool, sa.func.count(), sa.func.avg(seconds))
                .where(
                    st.c.call_tool.in_(names),
                    st.c.status == "succeeded",
                    st.c.used_fallback == 0,
                    st.c.started_at.is_not(None),
                    st.c.ended_at.is_not(None),
                )
                .group_by(st.c.call_tool)
            )
            for tool, n, mean in rows:
                out[tool] = ToolLatency(calls=float(n), mean=max(float(mean), 0.0))
            rest = [n for n in names if n not in out]
            if rest:
                rows = conn.execute(
                    sa.select(ts.c.tool, sa.func.sum(ts.c.n), sa.func.sum(ts.c.latency))
                    .where(ts.c.tool.in_(rest))
                    .group_by(ts.c.tool)
                )
                for tool, n, total in rows:
                    if n and n > 0:
                        out[tool] = ToolLatency(calls=float(n), mean=max(float(total) / float(n), 0.0))
        return out

    return await db.read(read)  # type: ignore[no-any-return]
