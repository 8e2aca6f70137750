"""`EmbeddingToolRanker`: deferred tools ranked by meaning, for `toolplan.tools.ToolSearch`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import UserError
from ._base import _numpy
from ._embeddings import EmbeddingKind, EmbeddingProvider, LocalEmbeddings

__all__ = ("EmbeddingToolRanker",)


class EmbeddingToolRanker:
    """Ranks tool texts by the cosine of their embeddings with the query's (a `toolplan.tools.ToolScorer`).

    ```python
    search = ToolSearch(ranker=EmbeddingToolRanker())  # the bundled local model
    ```

    Each tool text is embedded once per kind in ``tool_kinds`` and its unit vectors are averaged
    (the vectors are kept, by text, for the ranker's life); a query costs one embedding (as a
    ``"query"``) and one matrix product. By default a tool text is embedded both as a passage and as
    a query: E5 models put ``"passage: "`` or ``"query: "`` in front, and a tool's one-line
    description reads like a query, so the average of the two finds paraphrased queries more often
    than either alone (on the labelled set of ``bench/tool_search.py``). With a provider that
    ignores ``kind``, pass ``tool_kinds=("passage",)`` so each text is embedded once.
    Needs ``pip install "toolplan[knowledge]"``.

    Args:
        embeddings: The model (default: `LocalEmbeddings`, on the CPU, nothing downloaded).
        tool_kinds: How each tool text is embedded (``"passage"``, ``"query"`` or both, averaged).
    """

    def __init__(
        self,
        embeddings: EmbeddingProvider | None = None,
        *,
        tool_kinds: Sequence[EmbeddingKind] = ("passage", "query"),
    ) -> None:
        kinds = tuple(dict.fromkeys(tool_kinds))
        if not kinds or any(k not in ("passage", "query") for k in kinds):
            raise UserError(f"tool_kinds must name 'passage', 'query' or both, got {tuple(tool_kinds)!r}.")
        self.embeddings = embeddings if embeddings is not None else LocalEmbeddings()
        self.tool_kinds: tuple[EmbeddingKind, ...] = kinds
        self._texts: tuple[str, ...] = ()
        self._matrix: Any = None

    async def prepare(self, texts: Sequence[str]) -> Any:
        """Embed ``texts`` now (else the first `rank` over them does); returns their unit vectors."""
        key = tuple(texts)
        if self._matrix is not None and key == self._texts:
            return self._matrix
        np = _numpy()
        matrix: Any = None
        for kind in self.tool_kinds:
            part = _unit(np, np.asarray(await self.embeddings.embed(list(key), kind=kind), dtype=np.float32), len(key))
            matrix = part if matrix is None else matrix + part
        matrix = _unit(np, matrix, len(key))
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
        return f"EmbeddingToolRanker({self.embeddings!r}, tool_kinds={self.tool_kinds!r})"


def _unit(np: Any, vectors: Any, rows: int) -> Any:
    """``vectors`` as ``rows`` rows of length 1 (a zero row stays zero)."""
    matrix = vectors.reshape(rows, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
