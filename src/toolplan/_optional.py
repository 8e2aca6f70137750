"""Optional dependencies: imported when a feature first needs them, with an error naming the extra."""

from __future__ import annotations

import importlib
from typing import Any

from ._errors import OptionalDependencyError

__all__ = ("import_optional", "require_optional")


def import_optional(module: str, feature: str, extra: str, *, package: str | None = None) -> Any:
    """The module ``module`` (by name: type checkers need not have it installed).

    Raises:
        OptionalDependencyError: It is not installed; the message says that ``feature`` needs it and
            names ``pip install "toolplan[extra]"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise OptionalDependencyError(feature, extra, package=package) from exc


def require_optional(feature: str, extra: str, *modules: str) -> None:
    """Import ``modules`` now, so that a package whose every part needs them fails at its import.

    Raises:
        OptionalDependencyError: One is not installed; the message names it, says that ``feature``
            needs it and names ``pip install "toolplan[extra]"``.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise OptionalDependencyError(feature, extra, package=exc.name) from exc
