"""``toolplan run --trace``: send the run's spans to the console, a file or an OTLP collector."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..tracing import configure_tracing
from ._loader import CliInputError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ("TRACE_HELP", "start_tracing")

TRACE_HELP = (
    "Trace the run with OpenTelemetry: 'console' (spans as JSON on stderr), 'otlp' (to the collector the "
    "OTEL_EXPORTER_OTLP_* variables name; needs opentelemetry-exporter-otlp-proto-http) or a file path "
    "(one JSON span a line). Needs toolplan[tracing]. See docs/observability.md."
)
_SDK = 'pip install "toolplan[tracing]"'


def _line(span: ReadableSpan) -> str:
    text: str = span.to_json(indent=None)
    return text + "\n"


def start_tracing(target: str) -> Callable[[], None]:
    """Trace every run from now on to ``target``; returns the function that flushes and stops."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
            SpanExporter,
        )
    except ImportError:
        raise CliInputError(f"--trace needs the OpenTelemetry SDK: {_SDK}") from None
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "toolplan"}
    provider = TracerProvider(resource=Resource.create(attributes))
    out: IO[str] | None = None
    exporter: SpanExporter
    if target == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    elif target == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise CliInputError(
                "--trace otlp needs the OTLP exporter: pip install opentelemetry-exporter-otlp-proto-http "
                "(or use --trace console, or --trace FILE)."
            ) from None
        exporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    else:
        path = Path(target)
        try:
            out = path.open("w", encoding="utf-8")
        except OSError as exc:
            raise CliInputError(
                f"--trace: cannot write the spans to {target!r} ({exc.strerror or exc}). Pass a writable file "
                "path, 'console' or 'otlp'."
            ) from None
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=_line)))
    configure_tracing(enabled=True, tracer_provider=provider)

    def stop() -> None:
        configure_tracing()
        provider.shutdown()  # flushes what is still queued
        if out is not None:
            out.close()

    return stop
