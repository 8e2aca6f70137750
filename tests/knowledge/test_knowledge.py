"""KnowledgeBase over a real SQLite file and a real PostgreSQL database, with `HashEmbeddings`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
import sqlalchemy as sa

from toolplan import ToolError, UserError, execute_plan
from toolplan.knowledge import KnowledgeBase, KnowledgeLimits, KnowledgeTools
from toolplan.testing import HashEmbeddings

POLICY = "Refunds are paid within 14 days of the return. Shipping is free above 50 euros."
TRAVEL = "The user prefers window seats and vegetarian meals on long flights."


async def test_ingest_is_idempotent_and_a_changed_text_replaces_its_source(store_url: str) -> None:
    embeddings = HashEmbeddings()
    async with KnowledgeBase(store_url, embeddings) as kb:
        first = await kb.ingest(POLICY, source="policy.md", metadata={"team": "support"})
        calls = embeddings.calls
        again = await kb.ingest(POLICY, source="policy.md", metadata={"team": "support"})
        assert (first.status, again.status, first.chunks) == ("added", "unchanged", 1)
        assert embeddings.calls == calls  # nothing embedded the second time
        changed = await kb.ingest(POLICY + " Gift cards never expire.", source="policy.md")
        assert changed.status == "replaced" and await kb.count() == 1
        hits = await kb.search("gift cards", mode="lexical")
        assert [h.source for h in hits] == ["policy.md"] and "Gift cards" in hits[0].content
        assert hits[0].metadata == {}


async def test_three_search_modes_return_scored_hits_with_sources(store_url: str) -> None:
    async with KnowledgeBase(store_url, HashEmbeddings()) as kb:
        await kb.ingest(POLICY, source="policy.md")
        await kb.ingest("Our office is in Lisbon, open Monday to Friday.", source="office.md")
        for mode in ("vector", "lexical", "hybrid"):
            hits = await kb.search("refunds returns days", mode=mode, k=2)
            assert hits[0].source == "policy.md", mode
            assert hits[0].score >= hits[-1].score
        hybrid = (await kb.search("refunds", k=1))[0]
        assert hybrid.vector_score is not None and hybrid.lexical_rank == 1
        assert set(hybrid.to_dict()) >= {"id", "source", "score", "content", "metadata"}


async def test_long_texts_are_chunked_and_every_chunk_is_searchable(store_url: str) -> None:
    limits = KnowledgeLimits(chunk_chars=200, chunk_overlap=20)
    text = " ".join(f"Paragraph {i} mentions the word token{i}." for i in range(60))
    async with KnowledgeBase(store_url, HashEmbeddings(), limits=limits) as kb:
        result = await kb.ingest(text, source="long.txt")
        assert result.chunks > 5 and await kb.count() == result.chunks
        hits = await kb.search("token42", mode="lexical", k=1)
        assert "token42" in hits[0].content and hits[0].position > 0


async def test_memories_filters_and_forget(store_url: str) -> None:
    async with KnowledgeBase(store_url, HashEmbeddings()) as kb:
        memory = await kb.remember(TRAVEL, tags=["travel", "food"])
        assert (await kb.remember(TRAVEL, tags=["food", "travel"])).status == "unchanged"
        await kb.ingest(POLICY, source="policy.md", metadata={"lang": "en"})
        recalled = await kb.search("window seats", filter={"kind": "memory"})
        assert [h.source for h in recalled] == [memory.source]
        assert recalled[0].metadata == {"kind": "memory", "tags": ["food", "travel"]}
        assert [h.source for h in await kb.search("seats refunds", filter={"tags": "food"})] == [memory.source]
        assert [h.source for h in await kb.search("seats refunds", filter={"lang": ["de", "en"]})] == ["policy.md"]
        assert [h.source for h in await kb.search("seats", filter={"source": "policy.md"}, mode="lexical")] == []
        assert await kb.forget(source=memory.source) == 1
        assert await kb.search("window seats", filter={"kind": "memory"}) == []
        hit = (await kb.search("refunds"))[0]
        assert await kb.forget(id=hit.id) == 1 and await kb.count() == 0


async def test_namespaces_never_see_each_other(store_url: str) -> None:
    async with KnowledgeBase(store_url, HashEmbeddings(), namespace="user:alice") as kb:
        await kb.remember("Alice's locker code is 4711.")
        await kb.remember("Bob's locker code is 1234.", namespace="user:bob")
        alice = await kb.search("locker code")
        bob = await kb.search("locker code", namespace="user:bob")
        assert [h.content for h in alice] == ["Alice's locker code is 4711."]
        assert [h.content for h in bob] == ["Bob's locker code is 1234."]
        tools = KnowledgeTools(kb, namespace="user:bob")
        assert [h["content"] for h in await tools.knowledge_search("locker")] == ["Bob's locker code is 1234."]
        assert (await tools.forget(source=alice[0].source)) == {"deleted": 0}  # Alice's is out of reach
        with pytest.raises(UserError, match="Namespace"):
            KnowledgeTools(kb, namespace="users/../bob")


@pytest.mark.parametrize(
    "query",
    ['"', "NEAR(a b)", "a OR", "* AND -", "col:value", "'; DROP TABLE toolplan_chunks; --", "ü ß 東京", "!!!"],
)
async def test_hostile_queries_are_words_not_syntax(tmp_path: Path, query: str) -> None:
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", HashEmbeddings()) as kb:
        await kb.ingest("Tokyo is 東京. NEAR and OR are plain words here: col value.", source="s")
        for mode in ("lexical", "hybrid", "vector"):
            hits = await kb.search(query, mode=mode)
            assert all(h.source == "s" for h in hits)
        assert await kb.count() == 1


async def test_hostile_inputs_are_refused_with_what_to_do(tmp_path: Path) -> None:
    limits = KnowledgeLimits(max_text_chars=5000, max_chunks=3, chunk_chars=100, chunk_overlap=10)
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", HashEmbeddings(), limits=limits) as kb:
        problems = {
            "limit is 5000": kb.ingest("x " * 3000),
            "makes .* chunks; the limit is 3": kb.ingest("word " * 200),
            "text is empty": kb.ingest("   "),
            "metadata is .* bytes": kb.ingest("ok", metadata={"big": "y" * 20000}),
            "JSON values": kb.ingest("ok", metadata={"n": float("nan")}),
            "source is .* characters": kb.ingest("ok", source="s" * 2000),
            "tags given": kb.remember("ok", tags=[str(i) for i in range(40)]),
            "Each tag": kb.remember("ok", tags=[""]),
            "k must be between": kb.search("ok", k=1000),
            "query is .* characters": kb.search("q" * 3000),
            "query is empty": kb.search(""),
            "filter has": kb.search("ok", filter={str(i): i for i in range(20)}),
            "Namespace": kb.search("ok", namespace="bad namespace"),
            "either source .* or id": kb.forget(),
        }
        for message, call in problems.items():
            with pytest.raises(ToolError, match=message):
                await call
        assert await kb.count() == 0


class _Broken(HashEmbeddings):
    """An embedding provider that answers with something unusable: ``answer(number of texts)``."""

    def __init__(self, answer: Callable[[int], Any]) -> None:
        super().__init__()
        self.answer = answer

    async def embed(self, texts: Sequence[str], *, kind: Literal["query", "passage"] = "passage") -> list[list[float]]:
        return self.answer(len(texts))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda n: [[1.0, 2.0]] + [[1.0]] * (n - 1), "vector 1 has 1 numbers but vector 0 has 2"),  # ragged
        (lambda n: [[1.0, "x"]] * n, "vector 0 is not all finite numbers"),  # not numbers
        (lambda n: [[1.0, 10**400]] * n, "vector 0 is not all finite numbers"),  # too large for a float
        (lambda n: [[1.0, {"a": 1}]] * n, "vector 0 is not all finite numbers"),  # an object in a vector
        (lambda n: [{"a": 1.0}] * n, "vector 0 is a dict"),  # an object for a vector
        (lambda n: [[1.0] * 70_000] * n, "vector 0 has 70000 numbers"),  # too many dimensions
        (lambda n: [[1.0]] * (n + 1), r"\d+ vector\(s\)"),
        (lambda n: "nope", "a str, not a list of vectors"),
    ],
)
async def test_an_unusable_embedding_is_one_clear_error(
    tmp_path: Path, answer: Callable[[int], Any], problem: str
) -> None:
    limits = KnowledgeLimits(chunk_chars=100, chunk_overlap=10)
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", _Broken(answer), limits=limits) as kb:
        with pytest.raises(ToolError, match=f"unusable vectors for [2-9] text.*: {problem}"):
            await kb.ingest("word " * 60, source="a")  # several chunks
        if "vector 1" not in problem:
            with pytest.raises(ToolError, match=f"unusable vectors for 1 text.*: {problem}"):
                await kb.search("one", mode="vector")
        assert await kb.count() == 0


async def test_an_embedding_too_large_for_float32_is_refused(tmp_path: Path) -> None:
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", _Broken(lambda n: [[1.0, 1e300]] * n)) as kb:
        with pytest.raises(ToolError, match="too large to store"):
            await kb.remember("one")


async def test_a_namespace_larger_than_the_scan_limit_is_refused(tmp_path: Path) -> None:
    limits = KnowledgeLimits(max_scan_chunks=2)
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", HashEmbeddings(), limits=limits) as kb:
        for i in range(3):
            await kb.ingest(f"note {i}", source=f"n{i}")
        assert len(await kb.search("note", mode="lexical")) == 3
        with pytest.raises(ToolError, match="Split it into namespaces"):
            await kb.search("note", mode="vector")


async def test_tools_in_a_plan_ingest_a_file_search_and_remember(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "policy.md").write_text(POLICY, encoding="utf-8")
    (workspace / "binary.bin").write_bytes(b"\xff\xfe\x00")
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", HashEmbeddings()) as kb:
        tools = KnowledgeTools(kb, workspace=workspace)
        annotations = {d.name: d.annotations for d in tools.definitions()}
        assert annotations["knowledge_search"].read_only and annotations["knowledge_search"].idempotent
        assert annotations["forget"].destructive and not annotations["knowledge_ingest"].read_only
        assert annotations["knowledge_ingest"].idempotent and annotations["remember"].idempotent
        assert KnowledgeTools(kb, read_only=True).names == ["knowledge_search"]
        plan = {
            "steps": [
                {"id": "add", "tool": "knowledge_ingest", "arguments": {"path": "policy.md"}},
                {"id": "mem", "tool": "remember", "arguments": {"text": TRAVEL, "tags": ["travel"]}},
                {
                    "id": "find",
                    "tool": "knowledge_search",
                    "arguments": {"query": "refunds", "k": 1},
                    "depends_on": ["add", "mem"],
                },
                {"id": "bad", "tool": "knowledge_ingest", "arguments": {"path": "binary.bin"}},
                {"id": "escape", "tool": "knowledge_ingest", "arguments": {"path": "../k.db"}},
            ]
        }
        result = await execute_plan(plan, [tools])
        assert result.outputs["add"]["status"] == "added" and result.outputs["add"]["source"] == "policy.md"
        assert result.outputs["find"][0]["source"] == "policy.md"
        assert "not UTF-8" in str(result.steps["bad"].error)
        assert "'..'" in str(result.steps["escape"].error)
        no_files = KnowledgeTools(kb)
        with pytest.raises(ToolError, match="reads no files"):
            await no_files.knowledge_ingest(path="policy.md")


async def test_the_migration_makes_the_chunks_table_and_its_text_index(store_url: str) -> None:
    async with KnowledgeBase(store_url, HashEmbeddings()) as kb:
        await kb.ingest(POLICY, source="p")
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        tables = set(sa.inspect(engine).get_table_names())
        assert "toolplan_chunks" in tables
        if store_url.startswith("sqlite"):
            assert "toolplan_chunks_fts" in tables
            with engine.begin() as conn:  # the triggers keep the index in step with deletes
                conn.execute(sa.text("DELETE FROM toolplan_chunks"))
                found = conn.execute(
                    sa.text("SELECT count(*) FROM toolplan_chunks_fts WHERE toolplan_chunks_fts MATCH 'refunds'")
                )
                assert found.scalar() == 0
    finally:
        engine.dispose()


async def test_a_search_sees_writes_made_through_another_knowledge_base(store_url: str) -> None:
    async with (
        KnowledgeBase(store_url, HashEmbeddings()) as reader,
        KnowledgeBase(store_url, HashEmbeddings()) as writer,
    ):
        await writer.ingest("alpha beta", source="a")
        assert [h.source for h in await reader.search("alpha", mode="vector")] == ["a"]  # now cached
        await writer.forget(source="a")
        await writer.ingest("gamma delta", source="b")  # same count as before: the largest seq tells
        assert [h.source for h in await reader.search("gamma", mode="vector")] == ["b"]
        await writer.forget(source="b")
        assert await reader.search("gamma", mode="vector") == []


@pytest.mark.slow
def test_any_model_input_to_the_tools_ends_in_a_result_or_a_tool_error(tmp_path: Path) -> None:
    import asyncio
    import os

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from toolplan import ToolResult

    url = f"sqlite:///{tmp_path / 'k.db'}"
    examples = int(os.environ.get("TOOLPLAN_HYPOTHESIS_EXAMPLES", "20"))
    json_values = st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.lists(st.text(max_size=5))
    arguments = st.fixed_dictionaries(
        {"query": st.text(max_size=200)},
        optional={
            "k": st.integers(-5, 100),
            "filter": st.dictionaries(st.text(max_size=8), json_values, max_size=20),
            "mode": st.sampled_from(["hybrid", "vector", "lexical", "other"]),
        },
    )

    async def seed() -> None:
        async with KnowledgeBase(url, HashEmbeddings()) as kb:
            await kb.ingest(POLICY, source="policy.md", metadata={"lang": "en", "tags": ["a"]})
            await kb.remember(TRAVEL, tags=["travel"])

    asyncio.run(seed())

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.sampled_from(["knowledge_search", "remember", "knowledge_ingest"]), args=arguments)
    def check(name: str, args: dict[str, object]) -> None:
        if name != "knowledge_search":
            args = {"text": args["query"], **({"tags": ["t"]} if name == "remember" else {})}

        async def call() -> ToolResult | None:
            async with KnowledgeBase(url, HashEmbeddings()) as kb:
                try:
                    return await KnowledgeTools(kb).execute(name, args)
                except ToolError:
                    return None

        result = asyncio.run(call())
        if result is not None and result.error is None and name == "knowledge_search":
            limit = args.get("k", 5)
            assert isinstance(result.content, list) and isinstance(limit, int) and len(result.content) <= limit

    check()
