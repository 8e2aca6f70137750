"""Tools: typed functions and multi-function tools the model can call (`Toolset`: several behind one `Tool`)."""

from .._errors import ToolOutputError as ToolOutputError
from ._context import RunContext as RunContext
from ._definition import SafetyClass as SafetyClass
from ._definition import ToolAnnotations as ToolAnnotations
from ._definition import ToolDefinition as ToolDefinition
from ._function import FunctionTool as FunctionTool
from ._function import tool as tool
from ._group import ToolGroup as ToolGroup
from ._registry import Tool as Tool
from ._registry import ToolRegistry as ToolRegistry
from ._registry import ToolsLike as ToolsLike
from ._registry import ValidatingTool as ValidatingTool
from ._result import ToolResult as ToolResult
from ._schema_tool import SchemaTool as SchemaTool
from ._search import ToolRanker as ToolRanker
from ._search import ToolScorer as ToolScorer
from ._search import ToolSearch as ToolSearch
from ._toolset import Toolset as Toolset

__all__ = (
    "FunctionTool",
    "RunContext",
    "SafetyClass",
    "SchemaTool",
    "Tool",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolGroup",
    "ToolOutputError",
    "ToolRanker",
    "ToolScorer",
    "ToolRegistry",
    "ToolResult",
    "ToolSearch",
    "Toolset",
    "ToolsLike",
    "ValidatingTool",
    "tool",
)
