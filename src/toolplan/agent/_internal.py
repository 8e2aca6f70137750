"""What the adapters and the MCP server may use of the agent's internals: the plan tool's schema and text.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._metatools import _PLAN_DESCRIPTION as _PLAN_DESCRIPTION
from ._metatools import _plan_schema as _plan_schema
