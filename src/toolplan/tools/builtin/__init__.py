"""Deprecated alias of `toolplan.builtin` (and of `toolplan.tools.Toolset`), kept for one release.

Each name still resolves, to the very same object, with a `DeprecationWarning` saying where it lives now.
"""

from __future__ import annotations

from ..._moved import moved_names as _moved_names

# Resolved at call time, by name: the tools layer does not import the built-in toolsets above it.
_MOVED = {
    "BraveSearch": "toolplan.builtin",
    "DataTools": "toolplan.builtin",
    "FileTools": "toolplan.builtin",
    "HttpPolicy": "toolplan.builtin",
    "HttpResponse": "toolplan.builtin",
    "HttpTools": "toolplan.builtin",
    "SearchHit": "toolplan.builtin",
    "SearchProvider": "toolplan.builtin",
    "SearchProviderError": "toolplan.builtin",
    "SearxNG": "toolplan.builtin",
    "Toolset": "toolplan.tools",
    "WebSearchTools": "toolplan.builtin",
    "search_provider_from_env": "toolplan.builtin",
}

__all__ = tuple(_MOVED)

__getattr__ = _moved_names(__name__, _MOVED)
