"""Backends: where tool calls run. ``RayBackend`` runs them on a Ray cluster (``pip install "toolplan[ray]"``).

``RayCodeRunner`` runs code mode's sandbox on a Ray worker (``RayBackend.code_runner(runner)``).

The in-process backend (``toolplan.execute.InProcessBackend``, the default) needs nothing; importing
this package imports no optional dependency: ``ray`` is imported when a `RayBackend` starts.
"""

from ._ray import RayBackend as RayBackend
from ._ray import RayCodeRunner as RayCodeRunner
from ._spec import backend_from_spec as backend_from_spec

__all__ = ("RayBackend", "RayCodeRunner", "backend_from_spec")
