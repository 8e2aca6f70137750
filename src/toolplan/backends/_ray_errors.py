"""What Ray's pieces share of its errors: ``ray`` missing (with the pip command), and a worker that died."""

from __future__ import annotations

from typing import Any

from .._optional import import_optional

__all__ = ("dead_worker_errors", "import_ray")


def import_ray() -> Any:
    """The ``ray`` module, or an `OptionalDependencyError` that names the pip command."""
    return import_optional("ray", "Running tools on Ray (RayBackend)", "ray", package="ray")


def dead_worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """What awaiting a call raises when the worker running it died (killed, out of memory, node lost)."""
    return (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError)
