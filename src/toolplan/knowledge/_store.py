"""The knowledge base's chunks in the store (``toolplan_chunks``): each function runs on the store's threads.

Reads run beside the store's writes (`Database.read`), writes in a transaction of their own
(`Database.transact`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .._errors import ToolError
from ..store import _internal as t

__all__ = ("Vectors", "chunk_rows", "count_chunks", "current", "delete_chunks", "lexical_rows", "read_vectors",
           "replace_source")  # fmt: skip

_chunks = t.chunks


@dataclass(slots=True)
class Vectors:
    """One namespace's vectors of one model, as read at ``version`` (its chunk count and largest seq)."""

    version: tuple[int, int]
    ids: list[str]
    sources: list[str]
    metas: list[str]
    matrix: Any  # numpy float32 (n, dims)


def _current_in(conn: sa.Connection, ns: str, src: str) -> tuple[str, int] | None:
    query = (
        sa.select(_chunks.c.doc_hash, sa.func.count())
        .where(_chunks.c.namespace == ns, _chunks.c.source == src)
        .group_by(_chunks.c.doc_hash)
    )
    row = conn.execute(query).first()
    return (row[0], int(row[1])) if row is not None else None


def current(engine: sa.Engine, ns: str, src: str) -> tuple[str, int] | None:
    """The stored version of source ``src`` and its chunk count, or None."""
    with engine.connect() as conn:
        return _current_in(conn, ns, src)


def replace_source(engine: sa.Engine, ns: str, src: str, version: str, rows: list[dict[str, Any]]) -> str:
    """Replace the chunks of ``src`` by ``rows`` unless ``version`` is stored already: added, replaced or unchanged."""
    with engine.begin() as conn:
        again = _current_in(conn, ns, src)
        if again is not None and again[0] == version:
            return "unchanged"
        conn.execute(sa.delete(_chunks).where(_chunks.c.namespace == ns, _chunks.c.source == src))
        conn.execute(sa.insert(_chunks), rows)
    return "added" if again is None else "replaced"


def delete_chunks(engine: sa.Engine, ns: str, *, source: str | None, id: str | None) -> int:
    """Delete the chunks of ``source``, or the one chunk ``id``; how many were deleted."""
    condition = _chunks.c.source == source if source is not None else _chunks.c.id == id
    with engine.begin() as conn:
        return int(conn.execute(sa.delete(_chunks).where(_chunks.c.namespace == ns, condition)).rowcount)


def count_chunks(engine: sa.Engine, ns: str) -> int:
    """How many chunks namespace ``ns`` holds."""
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(_chunks).where(_chunks.c.namespace == ns)
        return int(conn.execute(query).scalar_one())


def read_vectors(engine: sa.Engine, ns: str, model: str, cached: Vectors | None, limit: int, np: Any) -> Vectors | None:
    """The vectors of ``model`` in ``ns``: ``cached`` when no chunk of it was written since, else read anew."""
    where = (_chunks.c.namespace == ns, _chunks.c.model == model)
    with engine.connect() as conn:
        count, last = conn.execute(sa.select(sa.func.count(), sa.func.max(_chunks.c.seq)).where(*where)).one()
        version = (int(count), int(last or 0))
        if cached is not None and cached.version == version:
            return cached
        if count > limit:
            raise ToolError(
                f"Namespace {ns!r} holds more than {limit} chunks, more than one exact search scans. "
                "Split it into namespaces, or raise KnowledgeLimits.max_scan_chunks."
            )
        if count == 0:
            return None
        columns = [_chunks.c.id, _chunks.c.source, _chunks.c.meta, _chunks.c.embedding, _chunks.c.dims]
        ids, sources, metas, blobs, dims = [], [], [], [], 0
        for row in conn.execute(sa.select(*columns).where(*where).order_by(_chunks.c.seq)):
            ids.append(row[0])
            sources.append(row[1])
            metas.append(row[2])
            blobs.append(bytes(row[3]))
            dims = row[4]
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)
    return Vectors(version=version, ids=ids, sources=sources, metas=metas, matrix=matrix)


def lexical_rows(engine: sa.Engine, words: list[str], ns: str, fetch: int) -> list[tuple[str, str, str]]:
    """The chunks of ``ns`` that hold any of ``words`` (id, source, metadata), best first, at most ``fetch``."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            sql = sa.text(
                "SELECT c.id, c.source, c.meta FROM toolplan_chunks c, "
                "CAST(replace(CAST(plainto_tsquery('english', :q) AS text), '&', '|') AS tsquery) q "
                "WHERE c.namespace = :ns AND c.tsv @@ q ORDER BY ts_rank(c.tsv, q) DESC, c.id LIMIT :n"
            )
            params: dict[str, Any] = {"q": " ".join(words), "ns": ns, "n": fetch}
        else:
            sql = sa.text(
                "SELECT c.id, c.source, c.meta FROM toolplan_chunks_fts f "
                "JOIN toolplan_chunks c ON c.seq = f.rowid "
                "WHERE toolplan_chunks_fts MATCH :q AND c.namespace = :ns "
                "ORDER BY bm25(toolplan_chunks_fts), c.id LIMIT :n"
            )
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            params = {"q": match, "ns": ns, "n": fetch}
        return [(row[0], row[1], row[2]) for row in conn.execute(sql, params)]


def chunk_rows(engine: sa.Engine, ids: Iterable[str]) -> dict[str, tuple[str, int, str, str]]:
    """The chunks ``ids`` that exist: id → (source, position, content, metadata)."""
    columns = [_chunks.c.id, _chunks.c.source, _chunks.c.position, _chunks.c.content, _chunks.c.meta]
    with engine.connect() as conn:
        rows = conn.execute(sa.select(*columns).where(_chunks.c.id.in_(list(ids))))
        return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}
