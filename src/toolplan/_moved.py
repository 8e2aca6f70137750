"""Deprecated aliases: names a package no longer defines, still found where they moved, with a warning."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `module` that resolves each name of `moved` in the module it maps to.

    The name is imported when asked (never when `module` is), so a package may alias names of a package
    above it; each use warns with a `DeprecationWarning` saying where the name lives now.
    """

    def __getattr__(name: str) -> Any:
        new = moved.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated; import it from {new} (the old path goes away in the next release).",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)

    return __getattr__
