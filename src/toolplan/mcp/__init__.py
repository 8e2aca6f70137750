"""MCP both ways: tools of MCP servers in plans, and toolplan as an MCP server (a plan gateway).

```python
from toolplan import execute_plan
from toolplan.mcp import MCPToolset

async with MCPToolset("http://127.0.0.1:8000/mcp") as remote, MCPToolset.stdio("python server.py") as local:
    result = await execute_plan(plan, [remote, local])
```

`create_server(tools)` serves tools and ``execute_tool_plan`` over MCP (`toolplan mcp serve`).
Needs ``pip install "toolplan[mcp]"``. See docs/mcp.md.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._optional import require_optional as _require_optional

_require_optional("toolplan.mcp", "mcp", "mcp")

from ._connection import MCPConnectionError as MCPConnectionError
from ._convert import MCPHints as MCPHints
from ._server import create_server as create_server
from ._server import serve_http as serve_http
from ._server import serve_stdio as serve_stdio
from ._toolset import IDEMPOTENCY_META_KEY as IDEMPOTENCY_META_KEY
from ._toolset import MCPToolset as MCPToolset

__all__ = (
    "IDEMPOTENCY_META_KEY",
    "MCPConnectionError",
    "MCPHints",
    "MCPToolset",
    "create_server",
    "serve_http",
    "serve_stdio",
)
