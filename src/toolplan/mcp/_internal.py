"""What the CLI may use of the MCP package's internals (the server it starts).

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._server import is_loopback as is_loopback
