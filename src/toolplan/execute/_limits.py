"""`RunLimits`: every limit of a run in one frozen object, with its defaults defined once.

Entry points (`execute_plan`, streamed plans, the agent, code mode, the CLI) take a `RunLimits` or
build one from their keyword options; a plan's own limits are merged in by `RunLimits.merged`,
one rule everywhere: the tighter wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from .._errors import UserError
from .._numbers import finite_number
from ..plan import DEFAULT_MAX_STEPS, Budget, FailureMode, Plan
from ..plan._internal import _show
from ._cache import ResultCache
from ._window import WindowCharge

__all__ = ("DEFAULT_LIMITS", "DEFAULT_MAX_CONCURRENCY", "LimitOptions", "RunLimits", "limits_from")

#: Steps (or calls of one agent turn) running at once, unless a limit says otherwise.
DEFAULT_MAX_CONCURRENCY = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """The limits of one run: a plan run, or an agent run (shared by its turns, plans and code).

    Attributes:
        max_concurrency: Steps running at once, plan-wide (for an agent: calls of one turn and steps
            of one plan). A plan's own ``max_concurrency`` can only lower it.
        tool_concurrency: Most calls of a tool running at once, by tool name, on top of each tool's
            own ``concurrency`` annotation (the lower wins).
        step_timeout: Default timeout of one tool call in seconds (a step's or a tool's own timeout wins).
        deadline: Seconds the whole run may take: steps not started by then end ``not_run``, running
            ones ``timed_out``. The budget's ``max_latency`` is a deadline too; the earlier applies.
        budget: Calls, calls per tool, cost and latency; reserved when a call is dispatched.
        failure_mode: ``"fail_forward"`` (a failure skips only its dependents) or ``"fail_fast"``.
            Merged with a plan's own mode, ``"fail_fast"`` wins.
        max_steps: Most steps a plan may have.
        retry_delay: First backoff between retries of a step, in seconds (doubles, with jitter).
        window: A budget window beyond this run (`WindowCharge`: a `BudgetWindow` and the key charged,
            such as an API key): each call is reserved in it too, after the run's budget allowed it.
            A plan cannot set or loosen it; it is not stored with a durable run (pass it to resume).
        share_calls: Steps of one run that call the same ``read_only`` and ``idempotent`` tool with
            the same arguments make one call and share its result (see docs/plans.md, "Repeated
            calls"). False turns it off; so does a plan's own ``"share_calls": false``.
        cache: A `ResultCache`: results of ``read_only`` tools kept across runs for a time to live.
            Not stored with a durable run (pass it to resume).
    """

    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    tool_concurrency: Mapping[str, int] = field(default_factory=dict[str, int])
    step_timeout: float | None = None
    deadline: float | None = None
    budget: Budget = field(default_factory=Budget)
    failure_mode: FailureMode = "fail_forward"
    max_steps: int = DEFAULT_MAX_STEPS
    retry_delay: float = 0.1
    window: WindowCharge | None = None
    share_calls: bool = True
    cache: ResultCache | None = None

    def __post_init__(self) -> None:
        _count("max_concurrency", self.max_concurrency)
        _count("max_steps", self.max_steps)
        for name, n in self.tool_concurrency.items():
            _count(f"tool_concurrency[{_show(name)}]", n)
        _seconds("step_timeout", self.step_timeout)
        _seconds("deadline", self.deadline)
        _seconds("retry_delay", self.retry_delay, zero=True)
        if self.failure_mode not in ("fail_forward", "fail_fast"):
            raise UserError(f"failure_mode must be 'fail_forward' or 'fail_fast', got {_show(self.failure_mode)}.")
        if self.window is not None and not isinstance(self.window, WindowCharge):
            raise UserError(f"window must be a toolplan.execute.WindowCharge, got {type(self.window).__name__}.")
        if self.cache is not None and not isinstance(self.cache, ResultCache):
            raise UserError(f"cache must be a toolplan.ResultCache, got {type(self.cache).__name__}.")
        if not isinstance(self.share_calls, bool):
            raise UserError(f"share_calls must be True or False, got {_show(self.share_calls)}.")
        b = self.budget
        if not isinstance(b, Budget):
            raise UserError(f"budget must be a toolplan.Budget, got {type(b).__name__}.")
        if b.max_tool_calls is not None:
            _count("budget.max_tool_calls", b.max_tool_calls, zero=True)
        for name, n in b.max_tool_calls_per_tool.items():
            _count(f"budget.max_tool_calls_per_tool[{_show(name)}]", n, zero=True)
        _seconds("budget.max_cost", b.max_cost, zero=True, unit="")
        _seconds("budget.max_latency", b.max_latency)
        if b.warn_at is not None and (not finite_number(b.warn_at) or not 0 < b.warn_at <= 1):
            raise UserError(
                f"budget.warn_at must be a share of each limit, 0 < warn_at <= 1 (such as 0.8), or None; "
                f"got {_show(b.warn_at)}."
            )

    @classmethod
    def of(cls, limits: RunLimits | None = None, **options: Any) -> RunLimits:
        """``limits`` (or the defaults) with the options that are not None applied on top.

        The keyword options are the same names as the fields; this is how entry points that take
        both a ``limits`` object and individual options build the one object they run with.
        """
        base = limits if limits is not None else DEFAULT_LIMITS
        if limits is not None and not isinstance(limits, RunLimits):
            raise UserError(f"limits must be a toolplan.RunLimits, got {type(limits).__name__}.")
        given: dict[str, Any] = {}
        parts: list[Any] = [id(base)]  # the cache key (one loop: no comprehension or generator to set up)
        for k, v in options.items():
            if v is not None:
                given[k] = v
                parts.append((k, type(v), v))
        if not given:
            return base
        # Entry points build limits on every call (a plan of ten steps pays for it ten times less
        # than it costs): the same options on the same base give the same frozen object.
        try:
            key: Any = tuple(parts)
            cached = _OF_CACHE.get(key)
        except TypeError:  # an unhashable value (a budget): build it
            key, cached = None, None
        if cached is not None and cached[0] is base:  # the cache holds base: its id is not reused
            return cached[1]
        unknown = sorted(set(given) - set(cls.__dataclass_fields__))
        if unknown:
            raise UserError(f"Unknown limit {unknown[0]!r}. Known limits: {', '.join(cls.__dataclass_fields__)}.")
        made = replace(base, **given)
        if key is not None:
            if len(_OF_CACHE) >= 256:
                _OF_CACHE.clear()
            _OF_CACHE[key] = (base, made)
        return made

    @property
    def run_deadline(self) -> float | None:
        """Seconds the run may take: the earlier of ``deadline`` and ``budget.max_latency``."""
        return _low(self.deadline, self.budget.max_latency)

    def merged(self, plan: Plan | None) -> RunLimits:
        """These limits with a plan's own (``max_concurrency``, ``budget``, ``failure_mode``, ``share_calls``).

        The tighter wins: the lower concurrency and budget, ``fail_fast``, sharing off.
        """
        if plan is None:
            return self
        changes: dict[str, Any] = {}
        if plan.max_concurrency is not None and plan.max_concurrency < self.max_concurrency:
            changes["max_concurrency"] = plan.max_concurrency
        budget = plan.budget
        if budget is not None and (not budget.unlimited or budget.warn_at is not None):
            changes["budget"] = self.budget.merged(budget)
        if plan.failure_mode == "fail_fast" and self.failure_mode != "fail_fast":
            changes["failure_mode"] = "fail_fast"
        if not plan.share_calls and self.share_calls:
            changes["share_calls"] = False
        return replace(self, **changes) if changes else self


def _low(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _count(name: str, value: Any, *, zero: bool = False) -> None:
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UserError(f"{name} must be a whole number >= {low}, got {_show(value)}.")


def _seconds(name: str, value: Any, *, zero: bool = False, unit: str = " seconds") -> None:
    if value is None:
        return
    if not finite_number(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise UserError(f"{name} must be a finite number {bound}{unit}, or None for no limit; got {_show(value)}.")


class LimitOptions(TypedDict, total=False):
    """The limit options that `execute_plan`, `stream_plan` and `execute_plan_stream` take.

    Each one given (not None) overrides that field of ``limits`` (or of the defaults).

    Attributes:
        limits: Every limit in one `RunLimits`.
        max_concurrency: Steps running at once (default 20).
        timeout: The plan's deadline in seconds (``RunLimits.deadline``): unstarted steps end
            ``not_run``, running ones ``timed_out``.
        step_timeout: Default timeout of one call (a step's or tool's own timeout wins).
        failure_mode: ``"fail_forward"`` (default) or ``"fail_fast"``; a plan that says
            ``fail_fast`` (as chaining plans do by default) runs fail_fast.
        budget: Calls, cost and latency; combined with the plan's own, the tighter wins.
        max_steps: Most steps a plan may have (default 50; batch plans: always at most 50).
        retry_delay: First backoff between retries of a step, in seconds.
        share_calls: False: steps with the same call of a ``read_only`` and ``idempotent`` tool
            each make their own call (default: one call, its result shared).
        cache: A `ResultCache` of ``read_only`` tools' results across runs (default: none).
    """

    limits: RunLimits | None
    max_concurrency: int | None
    timeout: float | None
    step_timeout: float | None
    failure_mode: FailureMode | None
    budget: Budget | None
    max_steps: int | None
    retry_delay: float | None
    share_calls: bool | None
    cache: ResultCache | None


_OPTION_NAMES = frozenset(LimitOptions.__annotations__)


def limits_from(options: LimitOptions) -> RunLimits:
    """The one `RunLimits` of a run from an entry point's options (unknown names are refused)."""
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise UserError(f"Unknown option {sorted(unknown)[0]!r}. Known options: {', '.join(sorted(_OPTION_NAMES))}.")
    return RunLimits.of(
        options.get("limits"),
        max_concurrency=options.get("max_concurrency"),
        deadline=options.get("timeout"),
        step_timeout=options.get("step_timeout"),
        failure_mode=options.get("failure_mode"),
        budget=options.get("budget"),
        max_steps=options.get("max_steps"),
        retry_delay=options.get("retry_delay"),
        share_calls=options.get("share_calls"),
        cache=options.get("cache"),
    )


DEFAULT_LIMITS = RunLimits()
_OF_CACHE: dict[Any, tuple[RunLimits, RunLimits]] = {}
