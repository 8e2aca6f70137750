"""toolplan: run many tool calls from one model turn.

The model writes a declarative plan; toolplan validates it, runs it as a dependency graph with
maximal safe parallelism, keeps failures local and returns only the outputs the model asked for.
"""

from ._errors import ApprovalError as ApprovalError
from ._errors import ConcurrencyLimitError as ConcurrencyLimitError
from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import InvalidToolSchemaError as InvalidToolSchemaError
from ._errors import ModelAuthError as ModelAuthError
from ._errors import ModelConnectionError as ModelConnectionError
from ._errors import ModelFacingError as ModelFacingError
from ._errors import ModelHTTPError as ModelHTTPError
from ._errors import OpenAPISpecError as OpenAPISpecError
from ._errors import OptionalDependencyError as OptionalDependencyError
from ._errors import OutputValidationError as OutputValidationError
from ._errors import PlanIssue as PlanIssue
from ._errors import PlanNotFoundError as PlanNotFoundError
from ._errors import PlanValidationError as PlanValidationError
from ._errors import ReferenceResolutionError as ReferenceResolutionError
from ._errors import RunConflictError as RunConflictError
from ._errors import RunError as RunError
from ._errors import RunNotFoundError as RunNotFoundError
from ._errors import SandboxError as SandboxError
from ._errors import ServiceError as ServiceError
from ._errors import StoreError as StoreError
from ._errors import ToolError as ToolError
from ._errors import ToolOutputError as ToolOutputError
from ._errors import ToolplanError as ToolplanError
from ._errors import UncacheableToolError as UncacheableToolError
from ._errors import UnexpectedModelBehavior as UnexpectedModelBehavior
from ._errors import UnknownToolError as UnknownToolError
from ._errors import UsageLimitExceeded as UsageLimitExceeded
from ._errors import UserError as UserError
from ._errors import WorkerDiedError as WorkerDiedError
from ._version import __version__ as __version__
from .agent import Agent as Agent
from .agent import AgentResult as AgentResult
from .agent import BatchTool as BatchTool
from .agent import ExecutionStrategy as ExecutionStrategy
from .agent import NativeExecutor as NativeExecutor
from .agent import PlanTool as PlanTool
from .agent import SequentialExecutor as SequentialExecutor
from .agent import create_executor as create_executor
from .agent import run as run
from .execute import Approval as Approval
from .execute import ApprovalRequest as ApprovalRequest
from .execute import ApprovalRule as ApprovalRule
from .execute import CallContext as CallContext
from .execute import DryRunReport as DryRunReport
from .execute import PendingStep as PendingStep
from .execute import PlanResult as PlanResult
from .execute import ResultCache as ResultCache
from .execute import RunLimits as RunLimits
from .execute import StepError as StepError
from .execute import StepResult as StepResult
from .execute import current_call as current_call
from .execute import execute_plan as execute_plan
from .execute import execute_plan_sync as execute_plan_sync
from .execute import stream_plan as stream_plan
from .models import ModelPrice as ModelPrice
from .models import SpendLimits as SpendLimits
from .plan import Budget as Budget
from .plan import Plan as Plan
from .plan import Step as Step
from .plan import ValidationReport as ValidationReport
from .plan import parse_plan as parse_plan
from .plan import validate_plan as validate_plan
from .tools import FunctionTool as FunctionTool
from .tools import RunContext as RunContext
from .tools import Tool as Tool
from .tools import ToolAnnotations as ToolAnnotations
from .tools import ToolDefinition as ToolDefinition
from .tools import ToolRegistry as ToolRegistry
from .tools import ToolResult as ToolResult
from .tools import tool as tool

__all__ = (
    "Agent",
    "AgentResult",
    "Approval",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalRule",
    "BatchTool",
    "Budget",
    "CallContext",
    "ConcurrencyLimitError",
    "DryRunReport",
    "ExecutionStrategy",
    "FunctionTool",
    "InvalidArgumentsError",
    "InvalidToolSchemaError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelFacingError",
    "ModelHTTPError",
    "ModelPrice",
    "NativeExecutor",
    "OpenAPISpecError",
    "OptionalDependencyError",
    "OutputValidationError",
    "Plan",
    "PendingStep",
    "PlanIssue",
    "PlanNotFoundError",
    "PlanResult",
    "PlanTool",
    "PlanValidationError",
    "ReferenceResolutionError",
    "ResultCache",
    "RunConflictError",
    "RunContext",
    "RunError",
    "RunNotFoundError",
    "RunLimits",
    "SandboxError",
    "SequentialExecutor",
    "ServiceError",
    "SpendLimits",
    "Step",
    "StepError",
    "StepResult",
    "StoreError",
    "Tool",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolError",
    "ToolOutputError",
    "ToolRegistry",
    "ToolResult",
    "ToolplanError",
    "UncacheableToolError",
    "UnexpectedModelBehavior",
    "UnknownToolError",
    "UsageLimitExceeded",
    "UserError",
    "ValidationReport",
    "WorkerDiedError",
    "__version__",
    "create_executor",
    "current_call",
    "execute_plan",
    "execute_plan_sync",
    "parse_plan",
    "run",
    "stream_plan",
    "tool",
    "validate_plan",
)
