"""`ServiceConfig`: the service's limits and timings, checked once."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._errors import UserError
from .._numbers import finite_number
from ..execute import Backend, RunLimits, WindowLimits
from ..models import SpendLimits

__all__ = ("ServiceConfig",)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """How a planner service behaves.

    Attributes:
        max_body_bytes: Largest request body accepted (413 above it).
        max_active_per_key: Executions one API key may have queued or running at once (429 above it).
        slots: Executions this process runs at once; more wait queued (for it or another process).
        poll_interval: Seconds between looks for queued or orphaned executions and for cancels
            asked of another process (an execution posted here is started at once, not polled for).
        max_wait: Upper bound of ``?wait=`` on ``POST /v1/plans/{id}/executions``, in seconds.
        limits: The run limits of each execution.
        max_query_chars: Longest question ``POST /v1/requests`` takes.
        backend: Where the executions' tool calls run (``toolplan.backends.RayBackend()``: on a Ray
            cluster); None: in this process. Started before the service takes work.
        key_budget: A budget window per API key (calls and cost per period, and the model spend of
            the key's planning requests: tokens, money at ``spend``'s prices), kept in the store and
            shared by every process on it; None for none. ``GET /v1/budget`` shows a key's.
        spend: Caps on the model spend of one planning request (``POST /v1/requests``), and the
            price table that turns tokens into money (for these caps and ``key_budget``'s
            ``max_money``). None: no caps, no money reported.
        cache_ttl: Seconds each execution keeps the results of ``read_only`` tools in the store's
            result cache (`toolplan.ResultCache`, shared by every process on the store): a later
            execution's identical call is answered from it. A key made with its own ``cache_ttl``
            (``toolplan keys create --cache-ttl``) uses that instead; None or 0: no cache.
    """

    max_body_bytes: int = 1_048_576
    max_active_per_key: int = 32
    slots: int = 16
    poll_interval: float = 0.5
    max_wait: float = 60.0
    limits: RunLimits = field(default_factory=RunLimits)
    max_query_chars: int = 8_000
    backend: Backend | None = None
    key_budget: WindowLimits | None = None
    spend: SpendLimits | None = None
    cache_ttl: float | None = None

    def __post_init__(self) -> None:
        if self.backend is not None and not isinstance(self.backend, Backend):
            raise UserError(
                f"ServiceConfig.backend must be a toolplan backend (RayBackend(...)), not {self.backend!r}."
            )
        if self.key_budget is not None and not isinstance(self.key_budget, WindowLimits):
            raise UserError(f"ServiceConfig.key_budget must be a WindowLimits, not {type(self.key_budget).__name__}.")
        if self.spend is not None and not isinstance(self.spend, SpendLimits):
            raise UserError(f"ServiceConfig.spend must be a SpendLimits, not {type(self.spend).__name__}.")
        if self.cache_ttl is not None and (not finite_number(self.cache_ttl) or self.cache_ttl < 0):
            raise UserError(f"ServiceConfig.cache_ttl must be seconds >= 0 (or None), not {self.cache_ttl!r}.")
        for name in ("max_body_bytes", "max_active_per_key", "slots", "max_query_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"ServiceConfig.{name} must be a whole number of at least 1, not {value!r}.")
        for name in ("poll_interval", "max_wait"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.01 <= value <= 3600:
                raise UserError(f"ServiceConfig.{name} must be seconds from 0.01 to 3600, not {value!r}.")
