"""`EmbeddingToolRanker`: deferred tools ranked by meaning, for `toolplan.tools.ToolSearch`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._base import _numpy
from ._embeddings import EmbeddingProvider, LocalEmbeddings

__all__ = ("EmbeddingToolRanker",)


class EmbeddingToolRanker:
    """Ranks tool texts by the cosine of their embeddings with the query's (a `toolplan.tools.ToolScorer`).

    ```python
    search = ToolSearch(ranker=EmbeddingToolRanker())  # the bundled local model
    ```

    Each tool text is embedded once (the vectors are kept, by text, for the ranker's life); a query
    costs one embedding and one matrix product. Needs ``pip install "toolplan[knowledge]"``.

    Args:
        embeddings: The model (default: `LocalEmbeddings`, on the CPU, nothing downloaded).
    """

    def __init__(self, embeddings: EmbeddingProvider | None = None) -> None:
        self.embeddings = embeddings if embeddings is not None else LocalEmbeddings()
        self._texts: tuple[str, ...] = ()
        self._matrix: Any = None

    async def prepare(self, texts: Sequence[str]) -> Any:
        """Embed ``texts`` now (else the first `rank` over them does); returns their unit vectors."""
        key = tuple(texts)
        if self._matrix is not None and key == self._texts:
            return self._matrix
        np = _numpy()
        vectors = await self.embeddings.embed(list(key), kind="passage")
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(key), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
        self._matrix, self._texts = matrix, key
        return matrix

    async def _cosines(self, query: str, texts: Sequence[str]) -> Any:
        matrix = await self.prepare(texts)  # these texts' vectors, whatever another search prepares meanwhile
        np = _numpy()
        q = np.asarray((await self.embeddings.embed([query], kind="query"))[0], dtype=np.float32)
        norm = float(np.linalg.norm(q))
        return matrix @ (q / (norm or 1.0))

    async def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """The cosine of each text's embedding with the query's (a `toolplan.tools.ToolScorer`)."""
        if not texts:
            return []
        return [float(s) for s in (await self._cosines(query, texts)).tolist()]

    async def rank(self, query: str, texts: Sequence[str], k: int) -> list[int]:
        """Indices into ``texts`` of the ``k`` closest in meaning to ``query``, best first."""
        if not texts:
            return []
        np = _numpy()
        scores = await self._cosines(query, texts)
        count = min(k, len(scores))
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.lexsort((top, -scores[top]))]
        return [int(i) for i in top]

    def __repr__(self) -> str:
        return f"EmbeddingToolRanker({self.embeddings!r})"
