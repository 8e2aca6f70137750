"""When toolplan traces: the switches, and the tracer they lead to.

Tracing is off unless one of these says otherwise, checked in this order:

1. `tracing_enabled` (a context manager) for what runs inside it: one run, one agent run
   (``Agent(tracing=True)`` uses it for its runs);
2. `configure_tracing` for the whole process;
3. a tracer provider set with ``opentelemetry.trace.set_tracer_provider`` (an application that
   already traces gets toolplan's spans too).

The check costs a few dictionary lookups per plan, agent run or model request, never per step,
and `opentelemetry` is imported only once tracing is on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .. import _context
from .._errors import UserError
from . import _semconv as sc

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = (
    "capture_content",
    "configure_tracing",
    "content_limit",
    "get_tracer",
    "tracing_enabled",
    "tracing_is_on",
)

_INSTALL = 'pip install "toolplan[tracing]"'
_SWITCH: ContextVar[bool | None] = ContextVar("toolplan_tracing", default=None)
_enabled: bool | None = None  # configure_tracing(enabled=...): None leaves it to the tracer provider
_provider: TracerProvider | None = None
_capture: bool | None = None
_limit = 2000
_tracer: Tracer | None = None


def configure_tracing(
    *,
    enabled: bool | None = None,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool | None = None,
    content_limit: int = 2000,
) -> None:
    """Set how toolplan traces, for the whole process.

    Args:
        enabled: True traces every run, False none; None (the default) traces when a tracer
            provider is set (here or with ``opentelemetry.trace.set_tracer_provider``).
        tracer_provider: The provider toolplan's spans go to; None: the global one.
        capture_content: Record tool arguments and results on tool spans. None: as the
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable says (off
            unless ``true``). They may hold personal data: switch this on knowingly.
        content_limit: Most characters of one captured value (the head and tail are kept).
    """
    global _enabled, _provider, _capture, _limit, _tracer
    if isinstance(content_limit, bool) or not isinstance(content_limit, int) or content_limit < 64:
        raise UserError(f"content_limit must be a whole number of characters, at least 64; got {content_limit!r}.")
    _enabled, _provider, _capture, _limit, _tracer = enabled, tracer_provider, capture_content, content_limit, None


@contextmanager
def tracing_enabled(enabled: bool = True) -> Iterator[None]:
    """Trace (or, with False, do not trace) the runs started inside this block, whatever the process setting."""
    token = _SWITCH.set(enabled)
    try:
        yield
    finally:
        _SWITCH.reset(token)


def tracing_is_on() -> bool:
    """True when a run started here now would be traced."""
    switch = _SWITCH.get()
    if switch is not None:
        return switch
    if _enabled is not None:
        return _enabled
    if _provider is not None:
        return True
    trace = sys.modules.get("opentelemetry.trace")  # not imported: no provider can have been set
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def get_tracer() -> Tracer | None:
    """Toolplan's tracer when tracing is on, else None (the one check callers make)."""
    if not tracing_is_on():
        return None
    global _tracer
    tracer = _tracer
    if tracer is None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - a core dependency, unless installed without deps
            raise UserError(f"Tracing needs the OpenTelemetry API: {_INSTALL}") from exc
        from .._version import __version__

        tracer = _tracer = trace.get_tracer("toolplan", __version__, tracer_provider=_provider)
        if _context.trace_carrier is None:
            _context.trace_carrier = _carrier
    return tracer


def _carrier() -> dict[str, str] | None:
    """The current trace context as W3C headers (``traceparent``...), or None outside a trace."""
    from opentelemetry import propagate

    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers or None


def capture_content() -> bool:
    """True when tool arguments and results go on spans."""
    if _capture is not None:
        return _capture
    return os.environ.get(sc.CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


def content_limit() -> int:
    """Most characters of one captured value."""
    return _limit
