"""`KnowledgeBase`: chunks of text with their vectors in the store, searched by meaning, by words, or both."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlalchemy as sa

from .._errors import ToolError, UserError
from .._optional import import_optional
from .._vectors import check_vectors
from ..store import Store, open_store
from ..tools._internal import fuse_rankings
from . import _store as rows_of
from ._chunking import chunk_text
from ._embeddings import EmbeddingProvider

__all__ = ("IngestResult", "KnowledgeBase", "KnowledgeHit", "KnowledgeLimits", "SearchMode")

SearchMode = Literal["hybrid", "vector", "lexical"]
_NAMESPACE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
_WORD = re.compile(r"\w+", re.UNICODE)
_RRF_K = 60  # reciprocal rank fusion: score = sum of 1 / (60 + rank) over the rankings
_CHECKPOINT_EVERY = 200  # SQLite: writes between WAL checkpoints (the store's connections do not auto-checkpoint)
_CACHED_NAMESPACES = 8  # vector matrices kept in memory, most recently used first


def _numpy() -> Any:
    return import_optional("numpy", "The knowledge base", "knowledge", package="numpy")


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeLimits:
    """Bounds on what a knowledge base accepts: every input may come from a model or a hostile document.

    Attributes:
        max_text_chars: Longest text one ingest takes (and largest file, in bytes).
        max_chunks: Most chunks one ingested text may make.
        chunk_chars: Longest chunk (see `chunk_text`).
        chunk_overlap: Characters repeated between neighbouring chunks.
        max_query_chars: Longest search query.
        max_k: Most results one search returns.
        max_metadata_bytes: Largest metadata object, as JSON.
        max_tags: Most tags on one memory; max_tag_chars is the longest tag.
        max_source_chars: Longest source name.
        max_filter_keys: Most keys in a search filter.
        candidates: Results taken from each ranking before fusing and filtering.
        max_scan_chunks: Most chunks one vector search scans (a namespace above it is refused: split it).
    """

    max_text_chars: int = 1_000_000
    max_chunks: int = 2000
    chunk_chars: int = 1200
    chunk_overlap: int = 150
    max_query_chars: int = 2000
    max_k: int = 50
    max_metadata_bytes: int = 16 * 1024
    max_tags: int = 32
    max_tag_chars: int = 100
    max_source_chars: int = 1024
    max_filter_keys: int = 16
    candidates: int = 200
    max_scan_chunks: int = 500_000


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestResult:
    """What an ingest did: ``added`` (new source), ``replaced`` (its text changed) or ``unchanged``."""

    source: str
    status: Literal["added", "replaced", "unchanged"]
    chunks: int
    ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "status": self.status, "chunks": self.chunks, "ids": list(self.ids)}


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeHit:
    """One search result: a chunk, where it came from and how it scored.

    ``score`` is the ranking's own: cosine similarity (vector), BM25-like rank (lexical, higher is
    better), or the reciprocal rank fusion of both (hybrid). ``vector_score`` and ``lexical_rank``
    say what each side contributed (None where the chunk was not in that side's candidates).
    """

    id: str
    source: str
    position: int
    content: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    vector_score: float | None = None
    lexical_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "position": self.position,
            "score": round(self.score, 6),
            "content": self.content,
            "metadata": self.metadata,
        }
        if self.vector_score is not None:
            out["vector_score"] = round(self.vector_score, 6)
        if self.lexical_rank is not None:
            out["lexical_rank"] = self.lexical_rank
        return out


def _matches(metadata: Mapping[str, Any], source: str, flt: Mapping[str, Any]) -> bool:
    for key, wanted in flt.items():
        have: Any = source if key == "source" else metadata.get(key)
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(have == w or (isinstance(have, list) and w in have) for w in options):
            return False
    return True


class KnowledgeBase:
    """Texts cut into chunks, embedded and kept in a toolplan store (SQLite or PostgreSQL), searchable three ways.

    - ``vector``: exact cosine similarity over every stored vector of the namespace (NumPy).
    - ``lexical``: full text (SQLite FTS5 with the Porter stemmer, PostgreSQL ``tsvector`` in English),
      any query word may match, ranked by BM25 / ``ts_rank``.
    - ``hybrid`` (default): both rankings fused by reciprocal rank (1 / (60 + rank), summed).

    Every chunk lives in a namespace (an agent's, a user's): searches never cross namespaces.
    Ingest is idempotent: the same text under the same source adds nothing; a changed text
    replaces that source's chunks. Needs ``pip install "toolplan[knowledge]"``.

    Args:
        store: A `Store`, or a database URL (the knowledge base then opens and closes the store).
        embeddings: The `EmbeddingProvider` (e.g. `LocalEmbeddings()`).
        namespace: The namespace used when a call names none.
        limits: The bounds on inputs (`KnowledgeLimits`).
    """

    def __init__(
        self,
        store: Store | str,
        embeddings: EmbeddingProvider,
        *,
        namespace: str = "default",
        limits: KnowledgeLimits | None = None,
    ) -> None:
        _numpy()
        self._owns_store = isinstance(store, str)
        self.store: Store = open_store(store) if isinstance(store, str) else store
        self.embeddings = embeddings
        self.limits = limits or KnowledgeLimits()
        self.namespace = self._namespace(namespace, error=UserError)
        self._vectors: dict[tuple[str, str], rows_of.Vectors] = {}
        self._writes = 0

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the store if this knowledge base opened it."""
        if self._owns_store:
            await self.store.close()

    # -- validation --------------------------------------------------------------------------------

    def _namespace(self, namespace: str | None, *, error: type[Exception] = ToolError) -> str:
        if namespace is None:
            return self.namespace
        if not _NAMESPACE.fullmatch(namespace):
            raise error(f"Namespace {namespace[:140]!r} is not valid: use 1 to 128 letters, digits or _ . : @ -.")
        return namespace

    def _metadata(self, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        if metadata is None:
            return {}
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
            raise ToolError("metadata must be a JSON object with string keys.")
        try:
            text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            raise ToolError("metadata must hold only JSON values (no NaN or infinity).") from None
        if len(text.encode()) > self.limits.max_metadata_bytes:
            raise ToolError(
                f"metadata is {len(text.encode())} bytes as JSON; the limit is {self.limits.max_metadata_bytes}. "
                "Keep metadata to a few short fields."
            )
        return dict(metadata)

    def _source(self, source: str | None, doc_hash: str, default_prefix: str) -> str:
        if source is None:
            return f"{default_prefix}:{doc_hash[:16]}"
        if not source.strip() or "\x00" in source:
            raise ToolError("source must be a non-empty name without NUL characters (a file name, a URL, ...).")
        if len(source) > self.limits.max_source_chars:
            raise ToolError(f"source is {len(source)} characters long; the limit is {self.limits.max_source_chars}.")
        return source

    def _text(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ToolError("The text is empty: give the text to store.")
        if len(text) > self.limits.max_text_chars:
            raise ToolError(
                f"The text is {len(text)} characters long; the limit is {self.limits.max_text_chars}. "
                "Split it and ingest the parts under their own sources."
            )
        return text.replace("\x00", "")

    # -- writing -----------------------------------------------------------------------------------

    async def ingest(
        self,
        text: str,
        *,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> IngestResult:
        """Chunk, embed and store ``text`` under ``source`` (default: ``text:`` and a hash of the text).

        The same text under the same source again is ``unchanged`` (nothing embedded or written);
        a different text under a known source replaces that source's chunks.
        """
        return await self._ingest(text, source, self._metadata(metadata), namespace, "text")

    async def remember(
        self,
        text: str,
        *,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> IngestResult:
        """Store a memory: ``text`` with ``tags``, under source ``memory:<hash>``, marked ``{"kind": "memory"}``.

        Recall it with `search` (``filter={"kind": "memory"}`` or ``{"tags": "..."}`` to narrow).
        """
        tags = list(tags)
        if len(tags) > self.limits.max_tags:
            raise ToolError(f"{len(tags)} tags given; the limit is {self.limits.max_tags}.")
        for tag in tags:
            if not isinstance(tag, str) or not tag or len(tag) > self.limits.max_tag_chars:
                raise ToolError(f"Each tag must be a string of 1 to {self.limits.max_tag_chars} characters.")
        meta = self._metadata(metadata)
        meta.update({"kind": "memory", "tags": sorted(set(tags))})
        return await self._ingest(text, None, meta, namespace, "memory")

    async def _ingest(
        self, text: str, source: str | None, meta: dict[str, Any], namespace: str | None, prefix: str
    ) -> IngestResult:
        ns = self._namespace(namespace)
        text = self._text(text)
        doc_hash = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        src = self._source(source, doc_hash, prefix)
        model = self.embeddings.name
        meta_text = json.dumps(meta, ensure_ascii=False, sort_keys=True)
        # The metadata is part of what is stored: the same text with other metadata replaces it.
        version = hashlib.sha256(f"{doc_hash}\x00{meta_text}\x00{model}".encode()).hexdigest()

        found = await self.store.db.read(lambda engine: rows_of.current(engine, ns, src))
        if found is not None and found[0] == version:
            return IngestResult(source=src, status="unchanged", chunks=found[1])
        pieces = chunk_text(text, max_chars=self.limits.chunk_chars, overlap=self.limits.chunk_overlap)
        if len(pieces) > self.limits.max_chunks:
            raise ToolError(
                f"The text makes {len(pieces)} chunks; the limit is {self.limits.max_chunks}. "
                "Split it into smaller documents."
            )
        vectors = self._normalise(await self.embeddings.embed(pieces, kind="passage"), len(pieces))
        now = time.time()
        rows = [
            {
                "id": hashlib.sha256(f"{ns}\x00{src}\x00{version}\x00{i}".encode()).hexdigest(),
                "namespace": ns,
                "source": src,
                "doc_hash": version,
                "position": i,
                "content": piece,
                "meta": meta_text,
                "model": model,
                "dims": vectors.shape[1],
                "embedding": vectors[i].astype("<f4").tobytes(),
                "created_at": now,
            }
            for i, piece in enumerate(pieces)
        ]

        def write(engine: sa.Engine) -> str:
            done = rows_of.replace_source(engine, ns, src, version, rows)
            if done != "unchanged":
                self._wrote(engine)
            return done

        try:
            status = await self.store.db.transact(write)
        except Exception:
            # Two processes ingesting the same source at once: the loser finds the winner's rows.
            found = await self.store.db.read(lambda engine: rows_of.current(engine, ns, src))
            if found is None or found[0] != version:
                raise
            status = "unchanged"
        return IngestResult(source=src, status=status, chunks=len(rows), ids=tuple(r["id"] for r in rows))

    def _normalise(self, vectors: Sequence[Sequence[float]], count: int) -> Any:
        np = _numpy()
        try:
            checked = check_vectors(vectors, count, source=f"The embedding provider {self.embeddings.name!r}")
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        with np.errstate(over="ignore"):  # a number beyond float32 becomes inf, refused just below
            matrix = np.asarray(checked, dtype=np.float32)
        if not np.isfinite(matrix).all():  # finite as a float, too large for the stored float32
            raise ToolError(
                f"The embedding provider {self.embeddings.name!r} returned numbers too large to store "
                "(beyond 3.4e38); expected one finite vector per text."
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return matrix / norms

    async def forget(self, *, source: str | None = None, id: str | None = None, namespace: str | None = None) -> int:
        """Delete the chunks of ``source``, or the one chunk ``id``; returns how many were deleted."""
        ns = self._namespace(namespace)
        if (source is None) == (id is None):
            raise ToolError("Give either source (every chunk of a document or memory) or id (one chunk).")

        def delete(engine: sa.Engine) -> int:
            count = rows_of.delete_chunks(engine, ns, source=source, id=id)
            self._wrote(engine)
            return count

        return await self.store.db.transact(delete)  # type: ignore[no-any-return]

    def _wrote(self, engine: sa.Engine) -> None:
        """After a write (on the store's thread): move SQLite's WAL into the database file now and then."""
        self._writes += 1
        if engine.dialect.name == "sqlite" and self._writes % _CHECKPOINT_EVERY == 0:
            self.store.db.checkpoint()

    async def count(self, *, namespace: str | None = None) -> int:
        """How many chunks the namespace holds."""
        ns = self._namespace(namespace)

        return await self.store.db.read(lambda engine: rows_of.count_chunks(engine, ns))  # type: ignore[no-any-return]

    # -- searching ---------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        k: int = 5,
        mode: SearchMode = "hybrid",
        filter: Mapping[str, Any] | None = None,
        namespace: str | None = None,
    ) -> list[KnowledgeHit]:
        """The ``k`` chunks that best match ``query``, best first.

        Args:
            query: What to look for, in words.
            k: How many results (1 to ``limits.max_k``).
            mode: ``hybrid``, ``vector`` or ``lexical``.
            filter: Metadata to match: ``{"key": value}`` (equal, or contained in a list value) or
                ``{"key": [a, b]}`` (any of them); the key ``source`` matches the chunk's source.
            namespace: Where to search (default: the knowledge base's).
        """
        ns = self._namespace(namespace)
        if not isinstance(query, str) or not query.strip():
            raise ToolError("The query is empty: say what to look for.")
        if len(query) > self.limits.max_query_chars:
            raise ToolError(f"The query is {len(query)} characters long; the limit is {self.limits.max_query_chars}.")
        if not 1 <= k <= self.limits.max_k:
            raise ToolError(f"k must be between 1 and {self.limits.max_k}, got {k}.")
        if mode not in ("hybrid", "vector", "lexical"):
            raise ToolError(f"mode must be 'hybrid', 'vector' or 'lexical', not {mode!r}.")
        flt = self._filter(filter)
        pool = max(k, self.limits.candidates) if mode == "hybrid" else k
        vector: list[tuple[str, float]] = []
        lexical: list[str] = []
        if mode in ("hybrid", "vector"):
            vector = await self._vector(query, ns, flt, pool)
        if mode in ("hybrid", "lexical"):
            lexical = await self._lexical(query, ns, flt, pool)
        vector_scores = dict(vector)
        lexical_ranks = {chunk_id: rank for rank, chunk_id in enumerate(lexical, 1)}
        if mode == "vector":
            ranked = vector[:k]
        elif mode == "lexical":
            ranked = [(chunk_id, 1.0 / rank) for chunk_id, rank in lexical_ranks.items()][:k]
        else:
            ranked = fuse_rankings([chunk_id for chunk_id, _ in vector], lexical, k=_RRF_K)[:k]
        if not ranked:
            return []
        rows = await self.store.db.read(lambda engine: rows_of.chunk_rows(engine, [chunk_id for chunk_id, _ in ranked]))
        hits = []
        for chunk_id, score in ranked:
            row = rows.get(chunk_id)
            if row is None:  # deleted between the ranking and this read
                continue
            hits.append(
                KnowledgeHit(
                    id=chunk_id,
                    source=row[0],
                    position=row[1],
                    content=row[2],
                    metadata=json.loads(row[3]),
                    score=score,
                    vector_score=vector_scores.get(chunk_id),
                    lexical_rank=lexical_ranks.get(chunk_id),
                )
            )
        return hits

    def _filter(self, flt: Mapping[str, Any] | None) -> dict[str, Any]:
        if not flt:
            return {}
        if not isinstance(flt, Mapping):
            raise ToolError('filter must be an object such as {"tags": "travel"} or {"source": ["a.md", "b.md"]}.')
        if len(flt) > self.limits.max_filter_keys:
            raise ToolError(f"filter has {len(flt)} keys; the limit is {self.limits.max_filter_keys}.")
        return dict(self._metadata(flt))

    async def _vector(self, query: str, ns: str, flt: dict[str, Any], pool: int) -> list[tuple[str, float]]:
        np = _numpy()
        model = self.embeddings.name
        q = self._normalise(await self.embeddings.embed([query], kind="query"), 1)[0]
        vectors = await self._load_vectors(ns, model)
        if vectors is None:
            return []
        ids, sources, metas, matrix = vectors.ids, vectors.sources, vectors.metas, vectors.matrix
        if matrix.shape[1] != q.shape[0]:
            raise UserError(
                f"The stored vectors of {model!r} have {matrix.shape[1]} dimensions but the query has {q.shape[0]}: "
                "the provider changed its output; give it another name or re-ingest."
            )
        keep = list(range(len(ids)))
        if flt:
            keep = [i for i in keep if _matches(json.loads(metas[i]), sources[i], flt)]
            if not keep:
                return []
            matrix = matrix[keep]
        scores = matrix @ q
        count = min(pool, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.lexsort((top, -scores[top]))]
        return [(ids[keep[i]], float(scores[i])) for i in top]

    async def _load_vectors(self, ns: str, model: str) -> rows_of.Vectors | None:
        """The namespace's vectors: from memory when no chunk of it was written since, else read anew."""
        np = _numpy()
        limit = self.limits.max_scan_chunks
        key = (ns, model)
        cached = self._vectors.get(key)
        vectors: rows_of.Vectors | None = await self.store.db.read(
            lambda engine: rows_of.read_vectors(engine, ns, model, cached, limit, np)
        )
        self._vectors.pop(key, None)
        if vectors is not None:
            self._vectors[key] = vectors  # most recently used last
            while len(self._vectors) > _CACHED_NAMESPACES:
                self._vectors.pop(next(iter(self._vectors)))
        return vectors

    async def _lexical(self, query: str, ns: str, flt: dict[str, Any], pool: int) -> list[str]:
        words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:64]
        if not words:
            return []
        fetch = pool if not flt else max(pool, self.limits.candidates)

        rows = await self.store.db.read(lambda engine: rows_of.lexical_rows(engine, words, ns, fetch))
        ids = [chunk_id for chunk_id, source, meta in rows if not flt or _matches(json.loads(meta), source, flt)]
        return ids[:pool]

    def __repr__(self) -> str:
        return f"KnowledgeBase(namespace={self.namespace!r}, embeddings={self.embeddings!r})"
