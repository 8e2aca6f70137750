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
from ._search import LoadedTools as LoadedTools
from ._search import ToolSearch as ToolSearch
from ._search import fuse_rankings as fuse_rankings
from ._search import loaded_tools as loaded_tools
from ._search import loading as loading
from ._search import note_loaded as note_loaded
from ._search import reset_loading as reset_loading
