"""Deferred tools: finding them by words (BM25), with a ranking by meaning that a caller may plug in.

The ranking by meaning lives above this package (``toolplan.knowledge.EmbeddingToolRanker``): it
satisfies `ToolRanker`. A ranker that also gives every text's score (`ToolScorer`, as the embedding
ranker does) is fused with the words by score: its similarity plus a small share of the BM25 score
(scaled to the query's best), so the words break the ties of meaning without outvoting it. Other
rankers are fused by reciprocal rank (`fuse_rankings`, also the knowledge base's hybrid search).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import ToolError, UserError
from ._definition import ToolDefinition

__all__ = ("LoadedTools", "ToolRanker", "ToolScorer", "ToolSearch", "fuse_rankings", "loading", "note_loaded")

RRF_K = 60  # reciprocal rank fusion: score = sum of 1 / (60 + rank) over the rankings
# Score fusion: similarity + WORDS_WEIGHT * bm25 / (the query's best bm25). Cosines of one query's
# tools lie close together (e5: within ~0.1), so a small share of words reorders near-ties only.
# Chosen on half of the labelled paraphrases (bench/tool_search.py), checked on the other half:
# 0.005 to 0.015 tie on the first half with tool texts embedded as passage and query; the middle.
WORDS_WEIGHT = 0.01
MAX_QUERY_CHARS = 1000
MAX_RESULTS = 20
_TEXT_CHARS = 2000  # of a tool's description and parameters that is indexed
INDEX_MAX_ENTRIES = 200  # names or namespaces in the short index; the rest are counted

IndexKind = Literal["none", "names", "namespaces"]


def fuse_rankings(*rankings: Sequence[str], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: ids by the sum of ``1 / (k + rank)`` over the rankings, best first (ties by id)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


@runtime_checkable
class ToolRanker(Protocol):
    """Ranks tool texts by meaning (an embedding model); `ToolSearch` fuses it with the word ranking."""

    async def rank(self, query: str, texts: Sequence[str], k: int) -> list[int]:
        """Indices into ``texts`` of the ``k`` best matches for ``query``, best first."""
        ...


@runtime_checkable
class ToolScorer(Protocol):
    """A `ToolRanker` that also scores every text (a similarity, higher is closer): fused with words by score."""

    async def scores(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        """One similarity per text of ``texts``, in order."""
        ...


# -- words ----------------------------------------------------------------------------------------

_SPLIT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "some",
        "that",
        "the",
        "their",
        "them",
        "this",
        "to",
        "what",
        "which",
        "with",
        "you",
        "your",
        "",
    }
)


def _stem(word: str) -> str:
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)] + keep
    return word


def words(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words of ``text`` (camelCase and snake_case split), stop words left out."""
    out = []
    for w in _SPLIT.findall(text):
        lw = w.lower()
        if lw not in _STOP:
            out.append(_stem(lw))
    return out


def tool_text(definition: ToolDefinition) -> str:
    """What is searched of a definition: its name, description and parameter names and descriptions."""
    parts = [definition.name.replace("_", " ").replace(":", " "), definition.description or ""]
    props = definition.parameters_json_schema.get("properties")
    if isinstance(props, Mapping):
        for key, value in list(props.items())[:50]:
            parts.append(str(key))
            if isinstance(value, Mapping) and isinstance(value.get("description"), str):
                parts.append(value["description"][:200])
    return " ".join(parts)[:_TEXT_CHARS]


def meaning_text(definition: ToolDefinition) -> str:
    """What is embedded of a definition for the ranking by meaning: its name's words and its description.

    Parameter names are left out here (the words index keeps them): with the bundled model they
    pulled tools that share parameters together, and recall on the labelled set was higher without.
    """
    name = " ".join(_SPLIT.findall(definition.name)).lower()
    return f"{name}: {definition.description or ''}"[:_TEXT_CHARS]


class _Bm25:
    """An inverted index of tool texts; the name's words count three times."""

    def __init__(self, names: Sequence[str], texts: Sequence[str]) -> None:
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.lengths: list[int] = []
        for i, (name, text) in enumerate(zip(names, texts, strict=True)):
            counts: dict[str, int] = {}
            for w in words(text):
                counts[w] = counts.get(w, 0) + 1
            for w in words(name.replace("_", " ")):
                counts[w] = counts.get(w, 0) + 2
            self.lengths.append(sum(counts.values()))
            for w, n in counts.items():
                self.postings.setdefault(w, []).append((i, n))
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0

    def rank(self, query: str, k: int) -> list[int]:
        scores = self.scores(query)
        return [i for i, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    def scores(self, query: str) -> dict[int, float]:
        """The BM25 score of every text that shares a word with ``query`` (by index)."""
        total = len(self.lengths)
        scores: dict[int, float] = {}
        for w in dict.fromkeys(words(query)):
            posting = self.postings.get(w)
            if not posting:
                continue
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, n in posting:
                norm = n * 2.2 / (n + 1.2 * (0.25 + 0.75 * self.lengths[i] / self.average))
                scores[i] = scores.get(i, 0.0) + idf * norm
        return scores


# -- the search -----------------------------------------------------------------------------------


class ToolSearch:
    """How the model finds deferred tools: ``search_tools`` ranks them by words, and by meaning with a ranker.

    Args:
        ranker: A ranking by meaning (``toolplan.knowledge.EmbeddingToolRanker()``, with the
            ``knowledge`` extra), fused with the word ranking; None: words alone.
        max_results: The most definitions one search returns (the model may ask for fewer).
        index: What the ``search_tools`` description lists of the deferred tools: ``"none"``,
            ``"names"`` (every name: small catalogues) or ``"namespaces"`` (each name prefix before
            ``:``, ``.`` or the first ``_``, with its count).
        candidates: How deep each ranking goes before fusion.
        words: With a ranker, fuse in the word ranking (True) or rank by meaning alone (False).
    """

    def __init__(
        self,
        *,
        ranker: ToolRanker | None = None,
        max_results: int = 5,
        index: IndexKind = "none",
        candidates: int = 50,
        words: bool = True,
    ) -> None:
        if not 1 <= max_results <= MAX_RESULTS:
            raise UserError(f"max_results must be between 1 and {MAX_RESULTS}, got {max_results}.")
        if index not in ("none", "names", "namespaces"):
            raise UserError(f"index must be 'none', 'names' or 'namespaces', not {index!r}.")
        if candidates < 1:
            raise UserError(f"candidates must be >= 1, got {candidates}.")
        self.ranker = ranker
        self.max_results = max_results
        self.index = index
        self.candidates = candidates
        self.words = words
        self._key: tuple[ToolDefinition, ...] = ()
        self._texts: list[str] = []
        self._meaning: list[str] = []
        self._bm25: _Bm25 | None = None

    def _prepare(self, definitions: Sequence[ToolDefinition]) -> _Bm25:
        key = tuple(definitions)
        if self._bm25 is None or key != self._key:
            self._texts = [tool_text(d) for d in key]
            self._meaning = [meaning_text(d) for d in key]
            self._bm25 = _Bm25([d.name for d in key], self._texts)
            self._key = key
        return self._bm25

    async def search(
        self, definitions: Sequence[ToolDefinition], query: str, k: int | None = None
    ) -> list[ToolDefinition]:
        """The best matches for ``query`` among ``definitions``, best first (at most ``k``, default ``max_results``).

        Raises:
            ToolError: the query is empty or too long, or ``k`` is out of range.
        """
        if not isinstance(query, str) or not query.strip():
            raise ToolError("The query is empty: say in a few words what the tool should do.")
        if len(query) > MAX_QUERY_CHARS:
            raise ToolError(f"The query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}.")
        k = self.max_results if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.max_results:
            raise ToolError(f"limit must be between 1 and {self.max_results}, got {k!r}.")
        if not definitions:
            return []
        bm25 = self._prepare(definitions)
        key, texts = self._key, self._meaning  # this search's (another may prepare other definitions meanwhile)
        if self.ranker is None:
            return [key[i] for i in bm25.rank(query, k)]
        if self.words and isinstance(self.ranker, ToolScorer):
            return [key[i] for i in _fuse_scores(await self.ranker.scores(query, texts), bm25.scores(query), k)]
        semantic = await self.ranker.rank(query, texts, self.candidates)
        if not self.words:
            return [key[i] for i in semantic[:k]]
        lexical = bm25.rank(query, self.candidates)
        fused = fuse_rankings([str(i) for i in semantic], [str(i) for i in lexical])
        return [key[int(i)] for i, _ in fused[:k]]

    def index_text(self, names: Iterable[str]) -> str:
        """The short index of the deferred tools for ``search_tools``' description ('' when ``index`` is "none")."""
        if self.index == "none":
            return ""
        names = list(names)
        if self.index == "names":
            return "Tools you can find: " + _capped(names) + "."
        counts: dict[str, int] = {}
        for name in names:
            head = re.split(r"[:._]", name, maxsplit=1)[0]
            counts[head] = counts.get(head, 0) + 1
        families = _capped([f"{h}: {n}" for h, n in counts.items()])
        return f"Tool families you can find (name prefix: count): {families}."


def _fuse_scores(meaning: Sequence[float], words: Mapping[int, float], k: int) -> list[int]:
    """The ``k`` best indices by ``meaning + WORDS_WEIGHT * words / max(words)``, ties by index."""
    fused = [float(s) for s in meaning]
    best = max(words.values(), default=0.0)
    if best > 0:
        for i, score in words.items():
            fused[i] += WORDS_WEIGHT * score / best
    return heapq.nsmallest(k, range(len(fused)), key=lambda i: (-fused[i], i))


def _capped(entries: list[str]) -> str:
    if len(entries) <= INDEX_MAX_ENTRIES:
        return ", ".join(entries)
    return ", ".join(entries[:INDEX_MAX_ENTRIES]) + f" and {len(entries) - INDEX_MAX_ENTRIES} more"


# -- what a run has loaded ------------------------------------------------------------------------


class LoadedTools:
    """The deferred tools one run has loaded (found by a search or named in a call), in the order loaded."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def add(self, name: str) -> None:
        """Note ``name`` as loaded (again: no change)."""
        self.names.setdefault(name, None)

    def __len__(self) -> int:
        return len(self.names)


_LOADED: ContextVar[LoadedTools | None] = ContextVar("toolplan_loaded_tools", default=None)


def loading(loaded: LoadedTools | None) -> Any:
    """Make ``loaded`` the current run's record of loaded tools; returns the token to reset it with."""
    return _LOADED.set(loaded)


def reset_loading(token: Any) -> None:
    """Undo `loading`."""
    _LOADED.reset(token)


def loaded_tools() -> LoadedTools | None:
    """The current run's record of loaded tools (None outside a run that tracks them)."""
    return _LOADED.get()


def note_loaded(name: str) -> None:
    """Record that the current run used deferred tool ``name`` (nothing outside a run that tracks it)."""
    loaded = _LOADED.get()
    if loaded is not None:
        loaded.add(name)
