"""Execution: the pure scheduler, the async executor, limits, the backend seam, events and results."""

from .._context import CallContext as CallContext
from .._context import current_call as current_call
from .._context import current_call_or_none as current_call_or_none
from ._api import PlanStream as PlanStream
from ._api import execute_compiled as execute_compiled
from ._api import execute_plan as execute_plan
from ._api import execute_plan_sync as execute_plan_sync
from ._api import prepare as prepare
from ._api import stream_plan as stream_plan
from ._approval import Approval as Approval
from ._approval import ApprovalCallback as ApprovalCallback
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import ApprovalRule as ApprovalRule
from ._approval import PendingStep as PendingStep
from ._backend import Backend as Backend
from ._backend import InProcessBackend as InProcessBackend
from ._cache import CacheStore as CacheStore
from ._cache import ResultCache as ResultCache
from ._choice import Choice as Choice
from ._choice import ChoiceOutcome as ChoiceOutcome
from ._choice import ChoiceRequest as ChoiceRequest
from ._choice import ToolChooser as ToolChooser
from ._dryrun import DryRunBudget as DryRunBudget
from ._dryrun import DryRunReport as DryRunReport
from ._dryrun import DryRunStep as DryRunStep
from ._dryrun import LatencyStats as LatencyStats
from ._dryrun import ToolLatency as ToolLatency
from ._events import ApprovalRequested as ApprovalRequested
from ._events import BudgetWarning as BudgetWarning
from ._events import CacheHit as CacheHit
from ._events import EventHandler as EventHandler
from ._events import PlanEvent as PlanEvent
from ._events import PlanFinished as PlanFinished
from ._events import PlanStarted as PlanStarted
from ._events import StepFinished as StepFinished
from ._events import StepRetrying as StepRetrying
from ._events import StepStarted as StepStarted
from ._events import ToolChosen as ToolChosen
from ._invoke import ToolInvoker as ToolInvoker
from ._journal import RunStore as RunStore
from ._journal import StoredStep as StoredStep
from ._limits import DEFAULT_LIMITS as DEFAULT_LIMITS
from ._limits import DEFAULT_MAX_CONCURRENCY as DEFAULT_MAX_CONCURRENCY
from ._limits import RunLimits as RunLimits
from ._result import DEFAULT_MAX_VALUE_CHARS as DEFAULT_MAX_VALUE_CHARS
from ._result import ErrorKind as ErrorKind
from ._result import PlanResult as PlanResult
from ._result import PlanStatus as PlanStatus
from ._result import StepError as StepError
from ._result import StepResult as StepResult
from ._result import StepStatus as StepStatus
from ._scheduler import Scheduler as Scheduler
from ._step import no_retry_backoff as no_retry_backoff
from ._streaming import StreamedPlanInvalid as StreamedPlanInvalid
from ._streaming import execute_plan_stream as execute_plan_stream
from ._window import BudgetWindow as BudgetWindow
from ._window import MemoryWindow as MemoryWindow
from ._window import WindowCharge as WindowCharge
from ._window import WindowLimits as WindowLimits
from ._window import WindowUsage as WindowUsage

__all__ = (
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_VALUE_CHARS",
    "Approval",
    "ApprovalCallback",
    "ApprovalRequest",
    "ApprovalRequested",
    "ApprovalRule",
    "Backend",
    "BudgetWarning",
    "BudgetWindow",
    "CacheHit",
    "CacheStore",
    "CallContext",
    "Choice",
    "ChoiceOutcome",
    "ChoiceRequest",
    "DryRunBudget",
    "DryRunReport",
    "DryRunStep",
    "ErrorKind",
    "EventHandler",
    "InProcessBackend",
    "LatencyStats",
    "MemoryWindow",
    "PendingStep",
    "PlanEvent",
    "PlanFinished",
    "PlanResult",
    "PlanStarted",
    "PlanStatus",
    "PlanStream",
    "ResultCache",
    "RunLimits",
    "RunStore",
    "Scheduler",
    "StepError",
    "StepFinished",
    "StepResult",
    "StepRetrying",
    "StepStarted",
    "StepStatus",
    "StoredStep",
    "StreamedPlanInvalid",
    "ToolChooser",
    "ToolChosen",
    "ToolInvoker",
    "ToolLatency",
    "WindowCharge",
    "WindowLimits",
    "WindowUsage",
    "current_call",
    "current_call_or_none",
    "execute_compiled",
    "execute_plan",
    "execute_plan_stream",
    "execute_plan_sync",
    "no_retry_backoff",
    "prepare",
    "stream_plan",
)
