"""OpenTelemetry tracing of plans, tool calls, agent runs and model requests.

Off unless switched on (`configure_tracing`, `tracing_enabled`, ``Agent(tracing=True)``) or a
tracer provider is set; when off, toolplan makes no span at all, not even a no-op one. See
docs/observability.md.
"""

from ._config import configure_tracing as configure_tracing
from ._config import tracing_enabled as tracing_enabled
from ._config import tracing_is_on as tracing_is_on

__all__ = ("configure_tracing", "tracing_enabled", "tracing_is_on")
