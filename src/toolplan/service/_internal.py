"""What the CLI may use of the service's internals (its store, for key management).

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._store import ServiceStore as ServiceStore
