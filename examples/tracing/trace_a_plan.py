"""Trace a plan with OpenTelemetry and print the span tree: ``python examples/tracing/trace_a_plan.py``.

Needs the OpenTelemetry SDK (``pip install "toolplan[tracing]"``). Replace the in-memory exporter
with your back-end's (OTLP, Jaeger, Honeycomb...) to see the same spans there.
"""

from __future__ import annotations

import asyncio
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolplan import ToolError, current_call, execute_plan, tool

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # a tracer provider is set: toolplan traces its runs from now on
my_tracer = trace.get_tracer("my-app")


@tool
async def weather(city: str) -> dict[str, object]:
    """The weather in a city."""
    with my_tracer.start_as_current_span(f"GET /weather/{city}"):  # nests under this call's span
        found = city != "Atlantis"
    if not found:
        raise ToolError(f"No such city: {city}")
    return {"city": city, "temp": 21}


@tool
def compare(a: dict[str, object], b: dict[str, object]) -> str:
    """Compare two readings (a sync tool: it runs in a thread, in its call's trace too)."""
    headers = current_call().trace_context or {}  # W3C headers, to carry the trace to another service
    same = "same" if a["temp"] == b["temp"] else "different"
    return f"{same} temperature (traceparent {headers['traceparent'][:2]}-...)"


PLAN = {
    "steps": [
        {"id": "tokyo", "tool": "weather", "arguments": {"city": "Tokyo"}},
        {"id": "paris", "tool": "weather", "arguments": {"city": "Paris"}},
        {"id": "atlantis", "tool": "weather", "arguments": {"city": "Atlantis"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:tokyo", "b": "$ref:paris"}},
        {"id": "never", "tool": "compare", "arguments": {"a": "$ref:tokyo", "b": "$ref:atlantis"}},
    ]
}


def show(spans: tuple[ReadableSpan, ...]) -> None:
    """Print the spans as a tree: name, status, and the step each tool call belongs to."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            step = (span.attributes or {}).get("toolplan.step.id")
            print(f"{'  ' * depth}{span.name} [{span.status.status_code.name}]" + (f" step={step}" if step else ""))
            for event in span.events:
                attributes = event.attributes or {}
                print(f"{'  ' * (depth + 1)}event {event.name} step={attributes.get('toolplan.step.id')}")
            walk(span.context.span_id if span.context else None, depth + 1)

    walk(None, 0)


async def main() -> int:
    result = await execute_plan(PLAN, [weather, compare])
    print(f"plan {result.status}: cmp -> {result.outputs.get('cmp')!r}")
    show(exporter.get_finished_spans())
    return 0 if result.steps["cmp"].ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
