"""The workload `bench.instructions` runs under cachegrind: ``python -m bench._icount SHAPE N PHASE K``.

It builds the case, runs every phase once as a warm-up (imports, caches, first-call costs), then
runs PHASE K times. Run with K=0 and K>0, the difference in executed instructions is the cost of K
runs, with start-up and warm-up cancelled out.
"""

from __future__ import annotations

import asyncio
import sys

from toolplan.execute import execute_compiled, prepare
from toolplan.plan import compile_plan
from toolplan.tools import ToolRegistry

from ._unhook import unhook_store
from .dags import Shape
from .executors import floor_run
from .overhead import Case, _noop_fn, noop

PHASES = ("floor", "compile", "toolplan")
# Phases of `bench.tracing` (not of `bench.instructions`): toolplan's run, the same code each time, with
TRACED = "traced"  # tracing on, spans recorded by the OpenTelemetry SDK
TRACED_NOOP = "traced_noop"  # tracing on, into OpenTelemetry's no-op provider (toolplan's span code, no recording)
UNHOOKED = "unhooked"  # the engine's one tracing check taken out: the run never asks whether it is traced
STORE_UNHOOKED = "store_unhooked"  # the engine's store checks taken out: the run never asks whether it has a store
TRACING_PHASES = (TRACED, TRACED_NOOP, UNHOOKED, STORE_UNHOOKED)


def _trace_everything() -> None:
    """Trace every run into the SDK, with a span processor that exports to nowhere (export cost excluded)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from toolplan.tracing import configure_tracing

    class Drop(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    configure_tracing(tracer_provider=provider)


def _trace_into_noop() -> None:
    """Trace every run into OpenTelemetry's no-op provider: toolplan's span code runs, nothing is recorded."""
    from opentelemetry.trace import NoOpTracerProvider

    from toolplan.tracing import configure_tracing

    configure_tracing(tracer_provider=NoOpTracerProvider())


def _unhook() -> None:
    """Take the engine's tracing check out: the run's ``get_tracer()`` becomes a builtin that returns None.

    What is left is the engine without its hook (one call of ``NoneType()`` per plan, about the
    cheapest call Python has), so "off" minus this is what the hook costs when tracing is off.
    """
    from toolplan.execute import _run

    _run.get_tracer = type(None)  # type: ignore[attr-defined]  # NoneType() is None: "not traced"


async def _main(shape: Shape, n: int, phase: str, k: int) -> None:
    if phase == TRACED:
        _trace_everything()
    elif phase == TRACED_NOOP:
        _trace_into_noop()
    elif phase == UNHOOKED:
        _unhook()
    elif phase == STORE_UNHOOKED:
        unhook_store()  # (`bench/_unhook.py`)
    case = Case(shape, n, seed=0)
    registry = ToolRegistry.of([noop])
    compiled, invoker = prepare(case.plan, registry, max_steps=n)
    await execute_compiled(compiled, invoker, max_concurrency=n)
    await floor_run(case.dag, _noop_fn)
    for _ in range(k):
        if phase == "floor":
            await floor_run(case.dag, _noop_fn)
        elif phase == "compile":
            compile_plan(case.plan, registry, max_steps=n)
        else:  # what the overhead benchmark times for toolplan: prepare + execute_compiled
            compiled, invoker = prepare(case.plan, [noop], max_steps=n)
            await execute_compiled(compiled, invoker, max_concurrency=n)


if __name__ == "__main__":
    shape, n, phase, k = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if phase not in (*PHASES, *TRACING_PHASES):
        raise SystemExit(f"phase must be one of {(*PHASES, *TRACING_PHASES)}")
    asyncio.run(_main(shape, n, phase, k))  # type: ignore[arg-type]  # a Shape name from the command line
