"""Agents: the loop, executors, and the meta-tools that let a model plan or write code."""

from ._agent import Agent as Agent
from ._agent import AgentStream as AgentStream
from ._agent import run as run
from ._code import CODE_TOOL_NAME as CODE_TOOL_NAME
from ._code import CodeTool as CodeTool
from ._code import code_instructions as code_instructions
from ._events import AgentEvent as AgentEvent
from ._events import ModelRequestStarted as ModelRequestStarted
from ._events import PlanStreamStarted as PlanStreamStarted
from ._events import RunFinished as RunFinished
from ._events import ToolExecutionFinished as ToolExecutionFinished
from ._events import ToolExecutionStarted as ToolExecutionStarted
from ._executors import ExecutionStrategy as ExecutionStrategy
from ._executors import NativeExecutor as NativeExecutor
from ._executors import SequentialExecutor as SequentialExecutor
from ._executors import ToolCallExecutor as ToolCallExecutor
from ._executors import create_executor as create_executor
from ._metatools import BATCH_TOOL_NAME as BATCH_TOOL_NAME
from ._metatools import PLAN_TOOL_NAME as PLAN_TOOL_NAME
from ._metatools import BatchTool as BatchTool
from ._metatools import MetaTool as MetaTool
from ._metatools import PlanTool as PlanTool
from ._metatools import batch_instructions as batch_instructions
from ._metatools import planning_instructions as planning_instructions
from ._options import OnLimit as OnLimit
from ._output import OUTPUT_TOOL_NAME as OUTPUT_TOOL_NAME
from ._result import AgentResult as AgentResult
from ._result import RunStatus as RunStatus
from ._result import WaitingTurn as WaitingTurn
from ._search import SEARCH_TOOL_NAME as SEARCH_TOOL_NAME
from ._search import SearchTool as SearchTool

__all__ = (
    "BATCH_TOOL_NAME",
    "CODE_TOOL_NAME",
    "OUTPUT_TOOL_NAME",
    "PLAN_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentStream",
    "BatchTool",
    "CodeTool",
    "ExecutionStrategy",
    "MetaTool",
    "ModelRequestStarted",
    "OnLimit",
    "NativeExecutor",
    "PlanStreamStarted",
    "PlanTool",
    "SearchTool",
    "RunFinished",
    "RunStatus",
    "SequentialExecutor",
    "ToolCallExecutor",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "batch_instructions",
    "code_instructions",
    "create_executor",
    "planning_instructions",
    "run",
    "WaitingTurn",
)
