"""Deprecated alias of `toolplan.builtin` (and of `toolplan.tools.Toolset`), kept for one release.

Each name still resolves, to the very same object, with a `DeprecationWarning` saying where it lives now.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = (
    "BraveSearch",
    "DataTools",
    "FileTools",
    "HttpPolicy",
    "HttpResponse",
    "HttpTools",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxNG",
    "Toolset",
    "WebSearchTools",
    "search_provider_from_env",
)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Resolved at call time, by name: the tools layer does not import the built-in toolsets above it.
    new = "toolplan.tools" if name == "Toolset" else "toolplan.builtin"
    warnings.warn(
        f"toolplan.tools.builtin.{name} is deprecated; import it from {new} "
        "(the old path goes away in the next release).",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(new), name)
