"""The result cache of an execution: the time to live of its API key, else the service's."""

from __future__ import annotations

import sqlalchemy as sa

from ..execute import ResultCache
from ..store import Store
from ..store import _internal as t

__all__ = ("cache_for",)


async def cache_for(store: Store, run_id: str, default_ttl: float | None) -> ResultCache | None:
    """A `ResultCache` in ``store`` for execution ``run_id``, or None when its key and the service keep none.

    The key's ``cache_ttl`` (``toolplan keys create --cache-ttl``) wins over ``default_ttl``
    (``toolplan serve --cache-ttl``); keys of ``--api-key-file`` use the service's.
    """
    e, k = t.executions, t.api_keys

    def read(engine: sa.Engine) -> float | None:
        query = sa.select(k.c.cache_ttl).select_from(e.join(k, k.c.id == e.c.api_key)).where(e.c.id == run_id)
        with engine.connect() as conn:
            return conn.execute(query).scalar()

    ttl = await store.db.read(read)
    if ttl is None:
        ttl = default_ttl
    return ResultCache(ttl=float(ttl), store=store) if ttl else None
