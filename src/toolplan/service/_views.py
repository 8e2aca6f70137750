"""Status reads: an execution's view, made again only when what it is made of has changed.

A view is made of the execution's row, its steps' rows and its plan (whose row never changes).
Every write to a step's row adds an event in the same transaction, and every other change of the
execution (its status, a cancel asked, its counters, its lease) is in its row. So one indexed read
of the row and of its last event's number tells whether the view made last time is still the one
to answer: a client polling a running execution gets the bytes made last time, without the steps
read, decoded and encoded again, until a step moves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from .._json import dumps
from ..store import RunInfo
from ..store import _internal as t
from ..store._internal import info_of, not_found
from ._read import read
from ._store import ServiceStore

__all__ = ("Views",)

KEPT = 1024  # views kept, the most recently made ones

_e, _ev = t.executions, t.events
_LAST_SEQ = sa.select(sa.func.max(_ev.c.seq)).where(_ev.c.execution_id == _e.c.id).scalar_subquery()
# Built once: the row and the number of its last event, in one statement (one snapshot on PostgreSQL).
_ROW = sa.select(_e, _LAST_SEQ.label("last_seq")).where(_e.c.id == sa.bindparam("run_id"))


class Views:
    """The service's status reads (`execution`), each view (``make``'s) kept with what it was made from."""

    def __init__(self, data: ServiceStore, make: Callable[[RunInfo], Mapping[str, Any]]) -> None:
        self.data = data
        self.make = make
        self._kept: dict[str, tuple[tuple[Any, ...], bytes]] = {}  # by execution id: (its row and last event, view)

    async def execution(self, run_id: str) -> bytes:
        """The execution's view as JSON (``make``'s), encoded.

        Raises:
            RunNotFoundError: no execution has that id.
        """
        kept = self._kept.get(run_id)

        def fetch(engine: sa.Engine) -> tuple[tuple[Any, ...], Any]:
            with engine.connect() as conn:
                row = conn.execute(_ROW, {"run_id": run_id}).mappings().first()
                if row is None:
                    raise not_found(run_id)
                made_of = tuple(row.values())
                if kept is not None and kept[0] == made_of:
                    return made_of, None
                return made_of, info_of(conn, run_id, row)  # read after the row: never older than it

        made_of, info = await read(self.data.store, fetch, self.data.readers)
        if info is None and kept is not None:
            return kept[1]
        body = dumps(dict(self.make(info))).encode()
        self._kept.pop(run_id, None)
        if len(self._kept) >= KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[run_id] = (made_of, body)
        return body
