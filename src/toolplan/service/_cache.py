"""The result cache of an execution: the time to live of its API key, else the service's."""

from __future__ import annotations

import sqlalchemy as sa

from ..execute import ResultCache
from ..store import Store
from ..store import _internal as t
from ._read import Readers, read

__all__ = ("cache_of", "key_of")

_e, _k = t.executions, t.api_keys
# Built once: the execution's key and that key's cache setting, in one indexed read.
_KEY_OF_RUN = (
    sa.select(_e.c.api_key, _k.c.cache_ttl)
    .select_from(_e.outerjoin(_k, _k.c.id == _e.c.api_key))
    .where(_e.c.id == sa.bindparam("run_id"))
)


async def key_of(store: Store, run_id: str, readers: Readers | None = None) -> tuple[str | None, float | None]:
    """The API key that started execution ``run_id`` and its ``cache_ttl`` (None and None: none, or no key)."""

    def fetch(engine: sa.Engine) -> tuple[str | None, float | None]:
        with engine.connect() as conn:
            row = conn.execute(_KEY_OF_RUN, {"run_id": run_id}).first()
        if row is None:
            return None, None
        return (None if row[0] is None else str(row[0])), (None if row[1] is None else float(row[1]))

    return await read(store, fetch, readers)  # type: ignore[no-any-return]


def cache_of(store: Store, key_ttl: float | None, default_ttl: float | None) -> ResultCache | None:
    """A `ResultCache` in ``store`` with the key's ``cache_ttl``, else ``default_ttl``; None when both keep none.

    The key's ``cache_ttl`` (``toolplan keys create --cache-ttl``) wins over ``default_ttl``
    (``toolplan serve --cache-ttl``); keys of ``--api-key-file`` use the service's.
    """
    ttl = default_ttl if key_ttl is None else key_ttl
    return ResultCache(ttl=float(ttl), store=store) if ttl else None
