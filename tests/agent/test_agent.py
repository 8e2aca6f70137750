from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolplan import ToolResult, tool
from toolplan.agent import (
    Agent,
    AgentEvent,
    ExecutionStrategy,
    NativeExecutor,
    RunFinished,
    SequentialExecutor,
    ToolExecutionFinished,
    ToolExecutionStarted,
    create_executor,
)
from toolplan.execute import StepStarted
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionModel, ScriptedModel, TestModel, ToolCallChunk


def calls(*items: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(items))
    )


def tool_messages(messages: Any) -> list[ToolReturnMessage]:
    return [m for m in messages if isinstance(m, ToolReturnMessage)]


async def test_parallel_calls_of_one_turn_overlap() -> None:
    arrived = 0
    all_here = asyncio.Event()

    @tool
    async def meet(who: str) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            all_here.set()
        await asyncio.wait_for(all_here.wait(), timeout=5)  # deadlocks unless all three run at once
        return f"hi {who}"

    model = ScriptedModel([calls(("meet", {"who": "a"}), ("meet", {"who": "b"}), ("meet", {"who": "c"})), "done"])
    events: list[AgentEvent] = []
    agent = Agent(model=model, tools=[meet])
    async with agent.run_stream("go") as stream:
        async for event in stream:
            events.append(event)
    result = stream.result
    assert result is not None and result.output == "done" and result.status == "completed"
    kinds = [e.kind for e in events if isinstance(e, (ToolExecutionStarted, ToolExecutionFinished))]
    assert kinds == ["tool_execution_started"] * 3 + ["tool_execution_finished"] * 3
    assert [m.content for m in tool_messages(result.messages)] == ["hi a", "hi b", "hi c"]
    assert isinstance(events[-1], RunFinished)
    model.assert_consumed()


async def test_sequential_executor_never_overlaps_and_keeps_order() -> None:
    active = 0
    peak = 0
    order: list[str] = []

    @tool
    async def step(name: str) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        order.append(name)
        await asyncio.sleep(0)
        active -= 1
        return name

    model = ScriptedModel([calls(("step", {"name": "x"}), ("step", {"name": "y"}), ("step", {"name": "z"})), "ok"])
    agent = Agent(model=model, tools=[step], strategy=ExecutionStrategy.SEQUENTIAL)
    result = await agent.run("go")
    assert peak == 1 and order == ["x", "y", "z"]
    assert result.output == "ok"


async def test_calls_beyond_the_per_turn_limit_are_not_run() -> None:
    ran: list[int] = []

    @tool
    def work(i: int) -> int:
        ran.append(i)
        return i

    model = ScriptedModel([calls(*[("work", {"i": i}) for i in range(4)]), "ok"])
    result = await Agent(model=model, tools=[work], max_tool_calls_per_turn=2).run("go")
    assert sorted(ran) == [0, 1]
    replies = tool_messages(result.messages)
    assert [m.is_error for m in replies] == [False, False, True, True]
    assert "at most 2 run per turn" in replies[2].content


async def test_max_iterations_ends_with_a_clear_status_when_asked_to_return() -> None:
    @tool
    def ping() -> str:
        return "pong"

    model = ScriptedModel([calls(("ping", {})), calls(("ping", {})), calls(("ping", {}))])
    result = await Agent(model=model, tools=[ping], max_iterations=3, on_limit="return").run("loop forever")
    assert result.status == "max_iterations"
    assert result.error is not None and "max_iterations=3" in result.error
    assert result.usage.requests == 3
    model.assert_consumed()


async def test_unknown_tools_bad_json_and_exceptions_reach_the_model_as_tool_messages() -> None:
    @tool
    def fragile() -> str:
        raise ValueError("disk on fire")

    @tool
    def lookup(city: str) -> ToolResult:
        return ToolResult.failure(f"No city called {city!r}.")

    broken = AssistantMessage(
        tool_calls=(
            ToolCall(id="a", name="nope", arguments="{}"),
            ToolCall(id="b", name="fragile", arguments="{}"),
            ToolCall(id="c", name="lookup", arguments='{"city": "Atlantis"}'),
            ToolCall(id="d", name="lookup", arguments="{city: Atlantis"),
            ToolCall(id="e", name="lookup", arguments='{"town": "x"}'),
        )
    )
    model = ScriptedModel([broken, "sorry"])
    result = await Agent(model=model, tools=[fragile, lookup]).run("go")
    replies = {m.tool_call_id: m for m in tool_messages(result.messages)}
    assert all(m.is_error for m in replies.values())
    assert "Unknown tool 'nope'" in replies["a"].content
    assert "ValueError: disk on fire" in replies["b"].content
    assert "No city called 'Atlantis'." in replies["c"].content
    assert "not valid JSON" in replies["d"].content
    assert "unexpected argument 'town'" in replies["e"].content
    assert result.output == "sorry"


@tool
def search(query: str) -> dict[str, Any]:
    """Search the web."""
    return {"url": f"https://example.org/{query}", "snippet": "x" * 400}


@tool
def fetch(url: str) -> dict[str, Any]:
    """Fetch a page."""
    return {"text": f"content of {url} " + "y" * 400, "words": 1200}


@tool
def count_words(text: str) -> int:
    """Count words."""
    return len(text.split())


@tool
def double(n: int) -> int:
    """Double a number."""
    return n * 2


@tool
def report(n: int) -> str:
    """Format a report."""
    return f"REPORT {n}"


CHAIN_TOOLS = [search, fetch, count_words, double, report]


async def test_planning_answers_a_five_call_dependent_task_in_two_requests() -> None:
    one_by_one = ScriptedModel(
        [
            calls(("search", {"query": "toolplan"})),
            calls(("fetch", {"url": "https://example.org/toolplan"})),
            calls(("count_words", {"text": "content"})),
            calls(("double", {"n": 1})),
            calls(("report", {"n": 2})),
            "The report is REPORT 2.",
        ]
    )
    loop = await Agent(model=one_by_one, tools=CHAIN_TOOLS).run("research toolplan")
    assert loop.usage.requests == 6

    plan = {
        "steps": [
            {"id": "s", "tool": "search", "arguments": {"query": "toolplan"}},
            {"id": "f", "tool": "fetch", "arguments": {"url": "$ref:s.url"}},
            {"id": "c", "tool": "count_words", "arguments": {"text": "$ref:f.text"}},
            {"id": "d", "tool": "double", "arguments": {"n": "$ref:c"}},
            {"id": "r", "tool": "report", "arguments": {"n": "$ref:d"}},
        ],
        "output_steps": ["r"],
    }
    planner = ScriptedModel([calls(("execute_tool_plan", plan)), "The report is REPORT 4."])
    planned = await Agent(model=planner, tools=CHAIN_TOOLS, tool_planning=True).run("research toolplan")
    assert planned.usage.requests == 2
    planner.assert_consumed()
    assert len(planned.plan_results) == 1 and planned.plan_results[0].outputs == {"r": "REPORT 8"}
    conversation = json.dumps([str(m) for m in planned.messages])
    assert "xxxx" not in conversation and "yyyy" not in conversation  # intermediate outputs stay out
    assert "REPORT 8" in tool_messages(planned.messages)[0].content
    system = planner.requests[0].messages[0]
    assert "execute_tool_plan" in str(system.content)
    assert "execute_tool_plan" in [t.name for t in planner.requests[0].tools]


async def test_an_invalid_plan_costs_no_tool_call_and_lists_every_problem() -> None:
    ran: list[str] = []

    @tool
    def probe(x: int) -> int:
        ran.append("probe")
        return x

    bad_plan = {
        "steps": [
            {"id": "a", "tool": "probe", "arguments": {"x": 1}},
            {"id": "b", "tool": "prob", "arguments": {"x": 1}},
            {"id": "c", "tool": "probe", "arguments": {"x": "$ref:zzz"}},
            {"id": "a", "tool": "probe", "arguments": {"x": "NaN"}},
            {"id": "d", "tool": "probe", "arguments": {"x": "not a number"}},
        ]
    }
    model = ScriptedModel([calls(("execute_tool_plan", bad_plan)), "gave up"])
    result = await Agent(model=model, tools=[probe], tool_planning=True).run("go")
    assert ran == []
    reply = tool_messages(result.messages)[0]
    assert reply.is_error
    for fragment in ("duplicate_id", "unknown_tool", "unknown_reference", "invalid_arguments", "no tool was called"):
        assert fragment in reply.content
    assert result.plan_results == ()


async def test_model_may_still_call_tools_directly_with_planning_enabled() -> None:
    model = ScriptedModel([calls(("double", {"n": 21})), "42"])
    result = await Agent(model=model, tools=CHAIN_TOOLS, tool_planning=True).run("double 21")
    assert tool_messages(result.messages)[0].content == "42"


async def test_streamed_plan_starts_steps_before_the_last_token() -> None:
    first_started = asyncio.Event()
    events: list[str] = []

    @tool
    async def slow_source(x: int) -> int:
        first_started.set()
        return x

    @tool
    async def sink(x: int) -> int:
        return x + 1

    plan_text = json.dumps(
        {
            "steps": [
                {"id": "a", "tool": "slow_source", "arguments": {"x": 1}},
                {"id": "b", "tool": "sink", "arguments": {"x": "$ref:a"}},
                {"id": "c", "tool": "sink", "arguments": {"x": 5}},
            ],
            "output_steps": ["b", "c"],
        }
    )
    cut = plan_text.index('{"id": "b"')

    async def stream_fn(messages: list[Any], info: Any) -> Any:
        if any(isinstance(m, ToolReturnMessage) for m in messages):
            yield "done"
            return
        yield ToolCallChunk(index=0, id="p1", name="execute_tool_plan", arguments="")
        for i in range(0, cut + 2, 7):
            yield ToolCallChunk(index=0, arguments=plan_text[i : min(i + 7, cut + 2)])
        # Step 'a' is complete now; the rest of the plan is only sent once it has started.
        await asyncio.wait_for(first_started.wait(), timeout=5)
        events.append("model:rest_of_plan")
        rest = plan_text[cut + 2 :]
        for i in range(0, len(rest), 7):
            yield ToolCallChunk(index=0, arguments=rest[i : i + 7])

    def on(event: AgentEvent) -> None:
        if isinstance(event, StepStarted):
            events.append(f"start:{event.step_id}")

    agent = Agent(
        model=FunctionModel(stream_function=stream_fn), tools=[slow_source, sink], tool_planning=True, stream_plans=True
    )
    async with agent.run_stream("go") as stream:
        async for event in stream:
            on(event)
    result = stream.result
    assert result is not None and result.output == "done"
    assert events[0] == "start:a" and events[1] == "model:rest_of_plan"
    assert set(events[2:]) == {"start:b", "start:c"}
    assert result.plan_results[0].outputs == {"b": 2, "c": 6}


async def test_streamed_plan_that_turns_out_invalid_cancels_what_it_started() -> None:
    never = asyncio.Event()
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def hang(x: int) -> int:
        started.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append("hang")
            raise
        return x

    plan_text = json.dumps(
        {
            "steps": [
                {"id": "a", "tool": "hang", "arguments": {"x": 1}},
                {"id": "b", "tool": "nonexistent", "arguments": {}},
            ]
        }
    )

    async def stream_fn(messages: list[Any], info: Any) -> Any:
        if any(isinstance(m, ToolReturnMessage) for m in messages):
            yield "fixed later"
            return
        yield ToolCallChunk(index=0, id="p1", name="execute_tool_plan", arguments="")
        cut = plan_text.index('{"id": "b"') + 2
        yield ToolCallChunk(index=0, arguments=plan_text[:cut])
        await asyncio.wait_for(started.wait(), timeout=5)
        yield ToolCallChunk(index=0, arguments=plan_text[cut:])

    agent = Agent(model=FunctionModel(stream_function=stream_fn), tools=[hang], tool_planning=True, stream_plans=True)
    result = await agent.run("go")
    assert cancelled == ["hang"]
    reply = tool_messages(result.messages)[0]
    assert reply.is_error and "unknown_tool" in reply.content
    assert "1 of its steps had started" in reply.content and "no tool was called" not in reply.content
    assert "- a (hang): cancelled while running" in reply.content
    # The record of what ran is kept with the run's plan results.
    (kept,) = result.plan_results
    assert kept.steps["a"].status == "cancelled" and kept.steps["a"].attempts == 1


async def test_test_model_calls_every_tool_once() -> None:
    result = await Agent(model=TestModel(), tools=[double, report]).run("anything")
    assert result.status == "completed"
    assert sorted(m.name for m in tool_messages(result.messages)) == ["double", "report"]
    assert result.usage.requests == 2


def test_run_sync_and_reserved_names() -> None:
    result = Agent(model=ScriptedModel(["hello"]), instructions="Be brief.").run_sync("hi")
    assert result.output == "hello"
    assert result.messages[0].content == "Be brief."

    @tool(name="execute_code")
    def sneaky() -> None: ...

    from toolplan import UserError

    with pytest.raises(UserError, match="reserved"):
        Agent(model=TestModel(), tools=[sneaky])


async def test_standalone_run() -> None:
    from toolplan.agent import run

    result = await run("double 2", tools=[double], model=ScriptedModel([calls(("double", {"n": 2})), "4"]))
    assert result.output == "4"


async def test_budget_spans_the_whole_run() -> None:
    from toolplan.plan import Budget

    model = ScriptedModel([calls(("double", {"n": 1}), ("double", {"n": 2}), ("double", {"n": 3})), "ok"])
    result = await Agent(model=model, tools=CHAIN_TOOLS, budget=Budget(max_tool_calls=2)).run("go")
    replies = tool_messages(result.messages)
    assert [m.is_error for m in replies] == [False, False, True]
    assert "max_tool_calls=2" in replies[2].content


async def test_model_errors_surface_as_themselves_even_mid_plan_stream() -> None:
    from toolplan import ModelHTTPError

    started = asyncio.Event()

    @tool
    async def slow(x: int) -> int:
        started.set()
        await asyncio.Event().wait()  # runs until cancelled
        return x

    plan_start = '{"steps": [{"id": "a", "tool": "slow", "arguments": {"x": 1}}, {"id": "b"'

    async def stream_fn(messages: list[Any], info: Any) -> Any:
        yield ToolCallChunk(index=0, id="p1", name="execute_tool_plan", arguments=plan_start)
        await asyncio.wait_for(started.wait(), timeout=5)
        raise ModelHTTPError("Service unavailable (503).", status_code=503)

    agent = Agent(model=FunctionModel(stream_function=stream_fn), tools=[slow], tool_planning=True, stream_plans=True)
    with pytest.raises(ModelHTTPError, match="503"):
        await agent.run("go")
    with pytest.raises(ModelHTTPError):
        async with agent.run_stream("go") as stream:
            async for _ in stream:
                pass


def test_create_executor_takes_the_strategy_and_the_concurrency() -> None:
    native = create_executor("native", max_concurrency=3)
    assert isinstance(native, NativeExecutor) and native.max_concurrency == 3
    assert isinstance(create_executor(ExecutionStrategy.SEQUENTIAL), SequentialExecutor)
    agent = Agent(model=TestModel(), max_concurrent_tools=4)
    with pytest.warns(DeprecationWarning, match=r"create_executor\(strategy, max_concurrency="):
        old = create_executor(agent, "native")  # the form of earlier versions, for one release
    assert isinstance(old, NativeExecutor) and old.max_concurrency == 4
