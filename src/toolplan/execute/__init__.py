"""Execution: the pure scheduler, the async executor, events and results."""

from ._events import EventHandler as EventHandler
from ._events import PlanEvent as PlanEvent
from ._events import PlanFinished as PlanFinished
from ._events import PlanStarted as PlanStarted
from ._events import StepFinished as StepFinished
from ._events import StepRetrying as StepRetrying
from ._events import StepStarted as StepStarted
from ._executor import DEFAULT_MAX_CONCURRENCY as DEFAULT_MAX_CONCURRENCY
from ._executor import PlanRun as PlanRun
from ._executor import PlanStream as PlanStream
from ._executor import execute_compiled as execute_compiled
from ._executor import execute_plan as execute_plan
from ._executor import execute_plan_sync as execute_plan_sync
from ._executor import no_retry_backoff as no_retry_backoff
from ._executor import prepare as prepare
from ._executor import set_retry_backoff as set_retry_backoff
from ._executor import stream_plan as stream_plan
from ._invoke import BudgetMeter as BudgetMeter
from ._invoke import CallOutcome as CallOutcome
from ._invoke import ToolInvoker as ToolInvoker
from ._result import ErrorKind as ErrorKind
from ._result import PlanResult as PlanResult
from ._result import PlanStatus as PlanStatus
from ._result import StepError as StepError
from ._result import StepResult as StepResult
from ._result import StepStatus as StepStatus
from ._scheduler import Scheduler as Scheduler
from ._streaming import StreamingPlan as StreamingPlan
from ._streaming import execute_plan_stream as execute_plan_stream

__all__ = (
    "DEFAULT_MAX_CONCURRENCY",
    "BudgetMeter",
    "CallOutcome",
    "ErrorKind",
    "EventHandler",
    "PlanEvent",
    "PlanFinished",
    "PlanResult",
    "PlanStarted",
    "PlanStatus",
    "PlanRun",
    "PlanStream",
    "Scheduler",
    "StepError",
    "StepFinished",
    "StepResult",
    "StepRetrying",
    "StepStarted",
    "StepStatus",
    "StreamingPlan",
    "ToolInvoker",
    "execute_compiled",
    "execute_plan",
    "execute_plan_stream",
    "execute_plan_sync",
    "no_retry_backoff",
    "prepare",
    "set_retry_backoff",
    "stream_plan",
)
