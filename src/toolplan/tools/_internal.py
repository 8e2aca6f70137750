"""What sibling packages may use of the tools package's internals: schema checks, function tools, foreign adapters.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._foreign import AgentsFunctionTool as AgentsFunctionTool
from ._foreign import LangChainTool as LangChainTool
from ._function import _strip_titles as _strip_titles
from ._group import alternatives_problem as alternatives_problem
from ._group import inline_group_name as inline_group_name
from ._result import owned as owned
from ._schema import SchemaCheck as SchemaCheck
from ._schema import check_for as check_for
from ._schema import invalid_message as invalid_message
from ._schema import normalize_schema as normalize_schema
