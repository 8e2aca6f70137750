"""Plans: the IR, dialect parsers, references, validation and graph utilities."""

from ._dump import NOT_EXPRESSIBLE as NOT_EXPRESSIBLE
from ._dump import dump_plan as dump_plan
from ._graph import critical_path as critical_path
from ._graph import mermaid as mermaid
from ._graph import waves as waves
from ._ir import MAX_FALLBACK_DEPTH as MAX_FALLBACK_DEPTH
from ._ir import META_TOOL_NAMES as META_TOOL_NAMES
from ._ir import Budget as Budget
from ._ir import Dialect as Dialect
from ._ir import FailureMode as FailureMode
from ._ir import Fallback as Fallback
from ._ir import Plan as Plan
from ._ir import Step as Step
from ._validate import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from ._validate import CompiledPlan as CompiledPlan
from ._validate import CompiledStep as CompiledStep
from ._validate import ValidationReport as ValidationReport
from ._validate import compile_plan as compile_plan
from ._validate import parse_plan as parse_plan
from ._validate import validate_plan as validate_plan

__all__ = (
    "DEFAULT_MAX_STEPS",
    "MAX_FALLBACK_DEPTH",
    "META_TOOL_NAMES",
    "NOT_EXPRESSIBLE",
    "Budget",
    "CompiledPlan",
    "CompiledStep",
    "Dialect",
    "FailureMode",
    "Fallback",
    "Plan",
    "Step",
    "ValidationReport",
    "compile_plan",
    "critical_path",
    "dump_plan",
    "mermaid",
    "parse_plan",
    "validate_plan",
    "waves",
)
