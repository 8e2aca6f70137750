"""`backend_from_spec`: the backend a command line or a config file names."""

from __future__ import annotations

from .._errors import UserError
from ..execute import Backend

__all__ = ("BACKEND_SPECS", "backend_from_spec")

BACKEND_SPECS = "local, ray, or ray:ADDRESS"
_MAX_SPEC = 500


def backend_from_spec(spec: str | None) -> Backend | None:
    """The backend named by ``spec`` (a command line's ``--backend``, a config's ``backend``).

    ``"local"`` (or None, or empty) gives None: the in-process default, at no added cost. ``"ray"``
    gives a `RayBackend` on a local cluster; ``"ray:ADDRESS"`` one that joins the cluster at ADDRESS
    (``ray:auto``, ``ray:10.0.0.5:6379``, ``ray:ray://head:10001``).

    Raises:
        UserError: any other value; the message lists the accepted ones.
        OptionalDependencyError: ``ray`` is named but not installed.
    """
    if spec is None:
        return None
    text = spec.strip()
    if len(text) > _MAX_SPEC:
        raise UserError(f"The backend setting is {len(text)} characters long; use {BACKEND_SPECS}.")
    if text in ("", "local"):
        return None
    kind, sep, address = text.partition(":")
    if kind != "ray" or (sep and not address.strip()):
        raise UserError(f"Unknown backend {text[:80]!r}: use {BACKEND_SPECS}.")
    from ._ray import RayBackend
    from ._ray_errors import import_ray

    import_ray()  # fail now, with the pip command, rather than at the first tool call
    return RayBackend(address=address.strip() or None)
