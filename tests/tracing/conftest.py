from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolplan.tracing import configure_tracing


@pytest.fixture
def provider() -> TracerProvider:
    """The tracer provider of the test (tools make their own spans with it)."""
    return TracerProvider()


@pytest.fixture
def exporter(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """toolplan traces every run into this in-memory exporter (the process setting is restored after)."""
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(tracer_provider=provider)
    try:
        yield exporter
    finally:
        configure_tracing()
        provider.shutdown()
