"""What sibling packages may use of the plan package's internals: references, conditions, parsing, field checks.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._expr import ExpressionFailed as ExpressionFailed
from ._fields import _show as _show
from ._ir import MissingField as MissingField
from ._ops import EXPRESSION_SCHEMA as EXPRESSION_SCHEMA
from ._ops import OPERATORS as OPERATORS
from ._parse import BATCH_MAX_STEPS as BATCH_MAX_STEPS
from ._parse import parse_source as parse_source
from ._refs import Ref as Ref
from ._refs import compile_arguments as compile_arguments
from ._refs import is_literal as is_literal
from ._refs import literal as literal
from ._resolve import check_condition as check_condition
from ._resolve import null_references as null_references
from ._resolve import resolve_compiled as resolve_compiled
from ._validate import compile_calls as compile_calls
from ._validate import step_dependencies as step_dependencies
