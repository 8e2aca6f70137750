"""The backend conformance suite: the engine's semantics, whatever backend runs the calls.

A test module imports these cases and provides a ``backend`` fixture (None for in-process, or a
started `RayBackend`). The same plan must give the same statuses, outputs, error kinds and messages.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from ray_tools import TOOLS, ledger

from toolplan import execute_plan
from toolplan.execute import Backend, PlanResult, RunLimits, no_retry_backoff


async def run(plan: dict[str, Any], backend: Backend | None, **options: Any) -> PlanResult:
    with no_retry_backoff():
        result: PlanResult = await execute_plan(plan, TOOLS, backend=backend, **options)
    return result


def statuses(result: PlanResult) -> dict[str, str]:
    return {sid: s.status for sid, s in result.steps.items()}


async def test_dataflow_with_field_paths(backend: Backend | None) -> None:
    plan = {
        "steps": [
            {"id": "tokyo", "tool": "weather", "arguments": {"city": "Tokyo"}},
            {"id": "oslo", "tool": "weather", "arguments": {"city": "Oslo"}},
            {
                "id": "cmp",
                "tool": "compare",
                "arguments": {"a": "$ref:tokyo.temp", "b": "$ref:oslo.tags[-1]", "note": "T is {{tokyo.city}}"},
            },
        ]
    }
    result = await run(plan, backend)
    assert result.status == "succeeded"
    assert result.steps["cmp"].output == {"a": 15, "b": "oslo", "note": "T is Tokyo"}


async def test_fail_forward_skips_dependents_only(backend: Backend | None) -> None:
    plan = {
        "steps": [
            {"id": "bad", "tool": "explode", "arguments": {"message": "disk on fire"}},
            {"id": "after", "tool": "compare", "arguments": {"a": "$ref:bad", "b": 1}},
            {"id": "sibling", "tool": "weather", "arguments": {"city": "Rome"}},
            {"id": "no", "tool": "refuse", "arguments": {"message": "city not found"}},
        ]
    }
    result = await run(plan, backend)
    assert statuses(result) == {"bad": "failed", "after": "skipped", "sibling": "succeeded", "no": "failed"}
    bad, no = result.steps["bad"].error, result.steps["no"].error
    assert bad is not None and bad.kind == "infrastructure"
    assert bad.message == "Tool 'explode' raised ValueError: disk on fire"
    assert no is not None and no.kind == "business" and no.message == "city not found"


async def test_call_context_travels_with_the_call(backend: Backend | None) -> None:
    plan = {"steps": [{"id": "me", "tool": "whoami", "arguments": {}, "timeout": 60}]}
    result = await run(plan, backend, run_id="run-ctx")
    assert result.steps["me"].output == {
        "run_id": "run-ctx",
        "step_id": "me",
        "attempt": 1,
        "key": "run-ctx:me",
        "has_deadline": True,
    }


async def test_retries_are_toolplans_with_the_same_key(backend: Backend | None, tmp_path: Path) -> None:
    path = str(tmp_path / "flaky.jsonl")
    plan = {"steps": [{"id": "f", "tool": "flaky", "arguments": {"ledger_path": path, "fail_times": 2}}]}
    result = await run(plan, backend, run_id="run-retry")
    step = result.steps["f"]
    assert step.status == "succeeded" and step.attempts == 3
    assert step.output == {"attempt": 3, "key": "run-retry:f"}
    assert [r["attempt"] for r in ledger(path)] == [1, 2, 3]  # each attempt ran exactly once


async def test_timeout_reaches_the_remote_call(backend: Backend | None, tmp_path: Path) -> None:
    plan = {"steps": [{"id": "slow", "tool": "hang", "arguments": {"marker_dir": str(tmp_path)}, "timeout": 1}]}
    result = await run(plan, backend)
    step = result.steps["slow"]
    assert step.status == "timed_out"
    assert step.error is not None and step.error.kind == "timeout"
    assert "did not finish within 1s and was cancelled" in step.error.message
    await _wait_for(tmp_path / "cancelled")  # the tool's coroutine was cancelled where it ran


async def test_fail_fast_cancels_running_steps(backend: Backend | None, tmp_path: Path) -> None:
    plan = {
        "steps": [
            {"id": "slow", "tool": "hang", "arguments": {"marker_dir": str(tmp_path)}},
            {"id": "gate", "tool": "whoami", "arguments": {}, "depends_on": []},
            {"id": "bad", "tool": "explode", "arguments": {"message": "$ref:gate.step_id"}},
        ]
    }
    result = await run(plan, backend, limits=RunLimits(failure_mode="fail_fast"))
    assert result.status == "failed"
    assert statuses(result)["bad"] == "failed"
    assert statuses(result)["slow"] == "cancelled"
    await _wait_for(tmp_path / "cancelled")


async def test_cancelling_the_run_cancels_the_remote_call(backend: Backend | None, tmp_path: Path) -> None:
    plan = {"steps": [{"id": "slow", "tool": "hang", "arguments": {"marker_dir": str(tmp_path)}}]}
    task = asyncio.create_task(run(plan, backend))
    await _wait_for(tmp_path / "started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _wait_for(tmp_path / "cancelled")


async def test_per_tool_limit_holds_across_workers(backend: Backend | None, tmp_path: Path) -> None:
    counter = tmp_path / "counter.json"
    steps = [
        {"id": f"s{i}", "tool": "limited", "arguments": {"counter_path": str(counter), "hold": 0.3}} for i in range(6)
    ]
    result = await run({"steps": steps}, backend)
    assert result.status == "succeeded"
    assert json.loads(counter.read_text())["most"] <= 2  # the limit is kept in the driver, for the whole cluster


async def _wait_for(path: Path, seconds: float = 30) -> None:
    """Wait until ``path`` exists (written by a tool in another process); fail after ``seconds``."""
    await asyncio.to_thread(wait_for_file, path, seconds)


def wait_for_file(path: Path, seconds: float = 30) -> None:
    """Block until ``path`` exists; `TimeoutError` after ``seconds``."""
    ends = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > ends:
            raise TimeoutError(f"{path} did not appear within {seconds}s")
        time.sleep(0.02)


async def test_the_tools_own_spans_join_the_calls_trace(backend: Backend | None) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolplan.tracing import configure_tracing

    plan = {"steps": [{"id": "t", "tool": "trace_parent", "arguments": {}}]}
    assert (await run(plan, backend)).outputs["t"] == ""  # not traced: no trace reaches the tool
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(tracer_provider=provider)
    try:
        result = await run(plan, backend)
    finally:
        configure_tracing()
        provider.shutdown()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool trace_parent"]
    assert span.context is not None
    assert result.outputs["t"] == format(span.context.trace_id, "032x")
