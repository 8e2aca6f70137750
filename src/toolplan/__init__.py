"""toolplan: run many tool calls from one model turn.

The model writes a declarative plan; toolplan validates it, runs it as a dependency graph with
maximal safe parallelism, keeps failures local and returns only the outputs the model asked for.
"""

from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import LimitExceededError as LimitExceededError
from ._errors import ModelAuthError as ModelAuthError
from ._errors import ModelConnectionError as ModelConnectionError
from ._errors import ModelFacingError as ModelFacingError
from ._errors import ModelHTTPError as ModelHTTPError
from ._errors import OptionalDependencyError as OptionalDependencyError
from ._errors import PlanIssue as PlanIssue
from ._errors import PlanValidationError as PlanValidationError
from ._errors import RunError as RunError
from ._errors import SandboxError as SandboxError
from ._errors import ToolError as ToolError
from ._errors import ToolplanError as ToolplanError
from ._errors import ToolTimeoutError as ToolTimeoutError
from ._errors import UnexpectedModelBehavior as UnexpectedModelBehavior
from ._errors import UnknownToolError as UnknownToolError
from ._errors import UserError as UserError
from ._version import __version__ as __version__
from .tools import FunctionTool as FunctionTool
from .tools import Tool as Tool
from .tools import ToolAnnotations as ToolAnnotations
from .tools import ToolDefinition as ToolDefinition
from .tools import ToolRegistry as ToolRegistry
from .tools import ToolResult as ToolResult
from .tools import tool as tool

__all__ = (
    "FunctionTool",
    "InvalidArgumentsError",
    "LimitExceededError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelFacingError",
    "ModelHTTPError",
    "OptionalDependencyError",
    "PlanIssue",
    "PlanValidationError",
    "RunError",
    "SandboxError",
    "Tool",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolTimeoutError",
    "ToolplanError",
    "UnexpectedModelBehavior",
    "UnknownToolError",
    "UserError",
    "__version__",
    "tool",
)
