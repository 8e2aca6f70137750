"""`HashEmbeddings`: a deterministic embedding provider for tests where the vectors' values do not matter."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Literal

__all__ = ("HashEmbeddings",)

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbeddings:
    """Bag-of-words vectors from hashed words: texts sharing words come out similar, nothing is learnt.

    Fast, offline and the same on every machine: for tests of code around a knowledge base (tools,
    plans, filters, storage). Retrieval quality needs a real model (`toolplan.knowledge.LocalEmbeddings`).

    Args:
        dimensions: The vectors' length.
    """

    def __init__(self, dimensions: int = 64) -> None:
        self.dimensions = dimensions
        self.calls = 0  # embed calls so far (a test can check that nothing was embedded)

    @property
    def name(self) -> str:
        return f"hash/{self.dimensions}"

    def vector(self, text: str) -> list[float]:
        """The vector of one text."""
        out = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dimensions
            out[slot] += 1.0 if digest[4] & 1 else -1.0
        if not any(out):
            out[0] = 1.0
        return out

    async def embed(self, texts: Sequence[str], *, kind: Literal["query", "passage"] = "passage") -> list[list[float]]:
        self.calls += 1
        return [self.vector(text) for text in texts]
