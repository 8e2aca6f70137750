"""Finding skills: words always, meaning too when an embedder is given.

The lexical score is the share of the query's words found in a skill's name, description and
tool names (a word that starts one of them counts half). With an embedder, the score is
``0.6 * cosine + 0.4 * lexical``, so a skill described in other words is still found. An
embedder is anything with ``embed(texts)`` or a callable ``(texts) -> vectors``, sync or async:
the knowledge toolset's embedding providers fit.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, TypeAlias

from .._vectors import check_vectors
from ._store import SkillRow

__all__ = ("Embedder", "EmbedFunction", "embed_texts", "lexical_score", "skill_text")

_WORD = re.compile(r"[a-z0-9]+")
Vectors: TypeAlias = Sequence[Sequence[float]]


class Embedder(Protocol):
    """Turns texts into vectors: ``embed(texts)``, sync or async."""

    def embed(self, texts: Sequence[str]) -> Vectors | Awaitable[Vectors]:
        """One vector per text."""
        ...


class EmbedFunction(Protocol):
    """A plain function that turns texts into vectors, sync or async."""

    def __call__(self, texts: Sequence[str]) -> Vectors | Awaitable[Vectors]:
        """One vector per text."""
        ...


async def embed_texts(embedder: Embedder | EmbedFunction, texts: Sequence[str]) -> list[list[float]]:
    """Vectors of ``texts`` from either kind of embedder, checked: one finite vector per text (else `ValueError`)."""
    call: Any = embedder.embed if hasattr(embedder, "embed") else embedder
    result = call(list(texts))
    if inspect.isawaitable(result):
        result = await result
    return check_vectors(result, len(texts))


def skill_text(row: SkillRow) -> str:
    """What a skill is found by: its name (words split), its description and its tools."""
    tools = " ".join(str(s.get("tool", "")) for s in row.plan.get("steps", []) if isinstance(s, dict))
    return f"{row.name.replace('_', ' ').replace('-', ' ')}: {row.description} ({tools})"


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def lexical_score(query: str, text: str) -> float:
    """The share of the query's words in ``text`` (1 each, 0.5 for a prefix of a word of it)."""
    wanted = set(_words(query))
    if not wanted:
        return 0.0
    have = set(_words(text))
    score = 0.0
    for word in wanted:
        if word in have:
            score += 1.0
        elif len(word) >= 3 and any(h.startswith(word) or word.startswith(h) for h in have if len(h) >= 3):
            score += 0.5
    return score / len(wanted)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 for vectors of different lengths or zero norm)."""
    if len(a) != len(b):
        return 0.0
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)
