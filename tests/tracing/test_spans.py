"""The span tree of plans and agent runs, the trace context tools see, and zero spans when off."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from inline_snapshot import snapshot
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracing_support import tree

from toolplan import ToolError, UserError, current_call, tool
from toolplan._context import run_deps
from toolplan.agent import Agent
from toolplan.execute import PlanEvent, StepFinished, execute_plan, execute_plan_stream
from toolplan.models import AssistantMessage, ToolCall
from toolplan.testing import ScriptedModel, disable_retry_backoff
from toolplan.tracing import configure_tracing, tracing_enabled, tracing_is_on

KEEP = ("toolplan.step.id", "toolplan.attempt", "toolplan.error.kind")

PLAN = {
    "steps": [
        {"id": "tokyo", "tool": "weather", "arguments": {"city": "Tokyo"}},
        {"id": "atl", "tool": "weather", "arguments": {"city": "Atlantis"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:tokyo", "b": "$ref:atl"}},
    ]
}


def _tools(meet: int = 1) -> list[Any]:
    """The plan's tools; ``meet`` calls of ``weather`` wait for each other (they must overlap)."""
    arrived = 0
    all_here = asyncio.Event()

    @tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        nonlocal arrived
        arrived += 1
        if arrived == meet:
            all_here.set()
        await asyncio.wait_for(all_here.wait(), timeout=10)  # deadlocks unless the calls run at once
        if city == "Atlantis":
            raise ToolError(f"No such city: {city}")
        return {"city": city, "temp": 21}

    @tool
    def compare(a: dict[str, Any], b: dict[str, Any]) -> str:
        """Compare two readings."""
        return "same"

    return [weather, compare]


async def test_a_scripted_agent_run_makes_the_genai_span_tree(exporter: InMemorySpanExporter) -> None:
    call = ToolCall(id="call_1", name="execute_tool_plan", arguments=json.dumps(PLAN))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Tokyo is 21C; Atlantis was not found."])
    agent = Agent(model=model, name="weatherbot", tools=_tools(meet=2), tool_planning=True)
    result = await agent.run("Compare Tokyo and Atlantis")
    assert result.output.startswith("Tokyo")
    assert tree(exporter.get_finished_spans(), keep=KEEP) == snapshot(
        [
            "invoke_agent weatherbot [UNSET]",
            "  chat scripted [UNSET]",
            "  chat scripted [UNSET]",
            "  execute_tool execute_tool_plan [ERROR]",
            "    event toolplan.step.not_called: step.id='cmp', status='skipped'",
            "    execute_tool weather [ERROR] step.id='atl', attempt=1, error.kind='business'",
            "    execute_tool weather [UNSET] step.id='tokyo', attempt=1",
        ]
    )
    spans = {s.name: s for s in exporter.get_finished_spans()}
    agent_span = spans["invoke_agent weatherbot"]
    assert agent_span.attributes is not None
    assert agent_span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert str(agent_span.attributes["toolplan.run.id"]).startswith("agent_")
    plan_span = spans["execute_tool execute_tool_plan"]
    assert plan_span.attributes is not None and plan_span.attributes["gen_ai.tool.call.id"] == "call_1"
    # The two weather calls ran in parallel: their spans overlap in time.
    weather = [s for s in exporter.get_finished_spans() if s.name == "execute_tool weather"]
    assert len(weather) == 2
    first, second = sorted(weather, key=lambda s: s.start_time or 0)
    assert (second.start_time or 0) < (first.end_time or 0)
    # Failed step: the error's message is the span's status description; the same trace throughout.
    failed = next(s for s in weather if (s.attributes or {}).get("toolplan.step.id") == "atl")
    assert failed.status.description == "No such city: Atlantis"
    assert len({s.context.trace_id for s in exporter.get_finished_spans() if s.context is not None}) == 1


async def test_a_standalone_plan_is_an_invoke_workflow_root_with_retries_as_spans(
    exporter: InMemorySpanExporter,
) -> None:
    tries = 0

    @tool(retry=2, idempotent=True)
    def flaky() -> str:
        """Fails twice, then works."""
        nonlocal tries
        tries += 1
        if tries < 3:
            raise RuntimeError("flaked")
        return "ok"

    with disable_retry_backoff():
        result = await execute_plan({"steps": [{"id": "f", "tool": "flaky"}]}, [flaky])
    assert result.ok
    assert tree(exporter.get_finished_spans(), keep=("toolplan.attempt", "toolplan.error.kind")) == snapshot(
        [
            "invoke_workflow [UNSET]",
            "  execute_tool flaky [ERROR] attempt=1, error.kind='infrastructure'",
            "  execute_tool flaky [ERROR] attempt=2, error.kind='infrastructure'",
            "  execute_tool flaky [UNSET] attempt=3",
        ]
    )


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_tool_sees_its_trace_context_and_its_spans_nest_under_its_call(
    exporter: InMemorySpanExporter, provider: TracerProvider, kind: str
) -> None:
    seen: dict[str, Any] = {}

    def body() -> str:
        call = current_call()
        seen["headers"] = call.trace_context
        seen["thread"] = threading.current_thread().name
        with provider.get_tracer("my-tool").start_as_current_span("my own work"):
            pass
        return "done"

    async def work_async() -> str:
        """Do the work."""
        return body()

    def work_sync() -> str:
        """Do the work."""
        return body()

    work: Any = tool(name="work")(work_async) if kind == "async" else tool(name="work")(work_sync)
    result = await execute_plan({"steps": [{"id": "w", "tool": "work"}]}, [work])
    assert result.ok
    assert tree(exporter.get_finished_spans()) == [
        "invoke_workflow [UNSET]",
        "  execute_tool work [UNSET]",
        "    my own work [UNSET]",
    ]
    assert (seen["thread"] != threading.main_thread().name) == (kind == "sync")
    tool_span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool work")
    assert tool_span.context is not None
    traceparent = seen["headers"]["traceparent"]
    assert traceparent.startswith(f"00-{tool_span.context.trace_id:032x}-{tool_span.context.span_id:016x}-")


async def test_off_by_default_no_span_and_no_trace_context() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # made, but not set as toolplan's nor as the global provider
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[Any] = []

    def work() -> str:
        """Do the work."""
        seen.append(current_call().trace_context)
        return "x"

    assert not tracing_is_on()
    result = await execute_plan({"steps": [{"id": "w", "tool": "work"}]}, [work])
    assert result.ok and seen == [None]
    assert exporter.get_finished_spans() == ()
    # Switched on for one run, off again after it.
    configure_tracing(enabled=False, tracer_provider=provider)
    try:
        with tracing_enabled():
            await execute_plan({"steps": [{"id": "w", "tool": "work"}]}, [work])
        await execute_plan({"steps": [{"id": "w", "tool": "work"}]}, [work])
    finally:
        configure_tracing()
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool work", "invoke_workflow"]
    provider.shutdown()


async def test_when_off_the_engine_never_imports_or_calls_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolplan.tracing._spans as spans

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("a span was made while tracing is off")

    monkeypatch.setattr(spans, "attempt_span", boom)
    monkeypatch.setattr(spans.PlanTrace, "start", boom)
    result = await execute_plan({"steps": [{"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}}]}, _tools())
    assert result.ok


async def test_an_agent_can_switch_tracing_off_for_its_runs(exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel(
        [AssistantMessage(tool_calls=(ToolCall(id="c0", name="weather", arguments='{"city":"Oslo"}'),)), "ok"]
    )
    await Agent(model=model, tools=_tools(), tracing=False).run("go")
    assert exporter.get_finished_spans() == ()
    model = ScriptedModel(
        [AssistantMessage(tool_calls=(ToolCall(id="c0", name="weather", arguments='{"city":"Oslo"}'),)), "ok"]
    )
    await Agent(model=model, tools=_tools(), name="direct").run("go")
    assert tree(exporter.get_finished_spans(), keep=("gen_ai.tool.call.id",)) == snapshot(
        [
            "invoke_agent direct [UNSET]",
            "  chat scripted [UNSET]",
            "  chat scripted [UNSET]",
            "  execute_tool weather [UNSET] gen_ai.tool.call.id='c0'",
        ]
    )


async def test_steps_started_after_a_timed_out_sync_tool_frees_its_slot_keep_the_run_context(
    exporter: InMemorySpanExporter,
) -> None:
    """A step that waited for a lingering thread's slot starts from the thread's done-callback.

    That callback used to run in the worker thread's context: the step lost the run's dependencies
    and its trace (its span became a root of a new trace).
    """
    release = threading.Event()
    seen: list[Any] = []

    @tool(concurrency=1, timeout=0.05)
    def slow(n: int) -> int:
        """Blocks the first time until released."""
        seen.append((n, run_deps(), current_call().trace_context is not None))
        if n == 0:
            release.wait(10)
        return n

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepFinished) and event.result.id == "first":  # timed out: let its thread end
            release.set()

    plan = {
        "steps": [
            {"id": "first", "tool": "slow", "arguments": {"n": 0}},
            {"id": "second", "tool": "slow", "arguments": {"n": 1}},
        ]
    }
    from toolplan._context import reset_run_deps, set_run_deps

    token = set_run_deps("the deps")
    try:
        result = await execute_plan(plan, [slow], on_event=on_event)
    finally:
        reset_run_deps(token)
    assert result.steps["first"].status == "timed_out"
    assert result.steps["second"].status == "succeeded"
    assert seen == [(0, "the deps", True), (1, "the deps", True)]
    traces = {s.context.trace_id for s in exporter.get_finished_spans() if s.context is not None}
    assert len(traces) == 1


async def test_a_streamed_plan_is_traced_as_its_steps_arrive(exporter: InMemorySpanExporter) -> None:
    text = json.dumps(PLAN)

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(text), 7):
            yield text[i : i + 7]

    result = await execute_plan_stream(pieces(), _tools(meet=2))
    assert result.status == "failed"
    assert tree(exporter.get_finished_spans(), keep=("toolplan.step.id",)) == snapshot(
        [
            "invoke_workflow [ERROR]",
            "  event toolplan.step.not_called: step.id='cmp', status='skipped'",
            "  execute_tool weather [ERROR] step.id='atl'",
            "  execute_tool weather [UNSET] step.id='tokyo'",
        ]
    )
    root = next(s for s in exporter.get_finished_spans() if s.name == "invoke_workflow")
    assert root.attributes is not None and root.attributes["toolplan.plan.steps"] == 3


async def test_an_agent_streaming_its_plan_traces_it_under_the_request(exporter: InMemorySpanExporter) -> None:
    call = ToolCall(id="call_9", name="execute_tool_plan", arguments=json.dumps(PLAN))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"], chunk_size=16)
    agent = Agent(model=model, name="streamer", tools=_tools(meet=2), tool_planning=True, stream_plans=True)
    await agent.run("go")
    assert tree(exporter.get_finished_spans(), keep=("toolplan.step.id",)) == snapshot(
        [
            "invoke_agent streamer [UNSET]",
            "  chat scripted [UNSET]",
            "    execute_tool execute_tool_plan [ERROR]",
            "      event toolplan.step.not_called: step.id='cmp', status='skipped'",
            "      execute_tool weather [ERROR] step.id='atl'",
            "      execute_tool weather [UNSET] step.id='tokyo'",
            "  chat scripted [UNSET]",
        ]
    )
    plan_span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool execute_tool_plan")
    assert plan_span.attributes is not None and plan_span.attributes["gen_ai.tool.call.id"] == "call_9"


async def test_arguments_and_results_only_with_content_capture(
    exporter: InMemorySpanExporter, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = {"steps": [{"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}}]}
    await execute_plan(plan, _tools())
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    await execute_plan(plan, _tools())
    configure_tracing(tracer_provider=provider, capture_content=True, content_limit=64)
    await execute_plan(
        {"steps": [{"id": "a", "tool": "compare", "arguments": {"a": {"x": "y" * 500}, "b": {}}}]}, _tools()
    )
    calls = [dict(s.attributes or {}) for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]
    assert "gen_ai.tool.call.arguments" not in calls[0]
    assert calls[1]["gen_ai.tool.call.arguments"] == '{"city": "Oslo"}'
    assert calls[1]["gen_ai.tool.call.result"] == '{"city": "Oslo", "temp": 21}'
    cut = str(calls[2]["gen_ai.tool.call.arguments"])
    assert len(cut) <= 64 and "chars cut" in cut and cut.endswith('}, "b": {}}')
    with pytest.raises(UserError, match="at least 64"):
        configure_tracing(content_limit=10)


async def test_a_plan_run_by_a_tool_nests_under_that_tools_call(exporter: InMemorySpanExporter) -> None:
    inner_tools = _tools()

    @tool
    async def outer() -> Any:
        """Runs a plan of its own (as a skill does)."""
        inner = await execute_plan(
            {"steps": [{"id": "in", "tool": "weather", "arguments": {"city": "Oslo"}}]}, inner_tools
        )
        return inner.outputs["in"]

    model = ScriptedModel([AssistantMessage(tool_calls=(ToolCall(id="c0", name="outer", arguments="{}"),)), "ok"])
    await Agent(model=model, tools=[outer], name="nest").run("go")
    assert tree(exporter.get_finished_spans(), keep=("toolplan.step.id",)) == snapshot(
        [
            "invoke_agent nest [UNSET]",
            "  chat scripted [UNSET]",
            "  chat scripted [UNSET]",
            "  execute_tool outer [UNSET] step.id='call0'",
            "    invoke_workflow [UNSET]",
            "      execute_tool weather [UNSET] step.id='in'",
        ]
    )


async def test_the_planners_requests_and_repair_sit_under_a_plan_span(exporter: InMemorySpanExporter) -> None:
    from toolplan.planner import SUBMIT_TOOL_NAME, Planner

    def submit(plan: Any, call_id: str) -> AssistantMessage:
        return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=SUBMIT_TOOL_NAME, arguments=json.dumps(plan)),))

    bad = {"steps": [{"id": "a", "tool": "no_such_tool", "arguments": {}}]}
    planner = Planner(ScriptedModel([submit(bad, "p1"), submit(PLAN, "p2")]), _tools())
    draft = await planner.plan("Compare Tokyo and Atlantis")
    assert draft.valid and draft.repaired
    assert tree(exporter.get_finished_spans(), keep=()) == snapshot(
        ["plan [UNSET]", "  chat scripted [UNSET]", "  chat scripted [UNSET]"]
    )
    (plan_span,) = [s for s in exporter.get_finished_spans() if s.name == "plan"]
    attributes = dict(plan_span.attributes or {})
    assert attributes["toolplan.plan.request_id"] == draft.request_id
    assert attributes["toolplan.plan.id"] == draft.plan_id
    assert attributes["toolplan.plan.valid"] is True and attributes["toolplan.plan.repaired"] is True
