"""What Ray's pieces share of its errors: ``ray`` missing (with the pip command), and a worker that died."""

from __future__ import annotations

import importlib
from typing import Any

from .._errors import OptionalDependencyError

__all__ = ("dead_worker_errors", "import_ray")


def import_ray() -> Any:
    """The ``ray`` module, or an `OptionalDependencyError` that names the pip command."""
    try:
        return importlib.import_module("ray")  # by name: type checkers need not have ray installed
    except ImportError as exc:
        raise OptionalDependencyError("Running tools on Ray (RayBackend)", "ray", package="ray") from exc


def dead_worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """What awaiting a call raises when the worker running it died (killed, out of memory, node lost)."""
    return (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError)
