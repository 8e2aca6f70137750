"""The two sets of names the built-in toolsets offer their functions under."""

from __future__ import annotations

from typing import Literal

from .._errors import UserError

__all__ = ("ToolNames", "check_names")

#: ``"toolplan"``: ``read_file``, ``run_shell``, ``http_get``, ``json_query``...; ``"oasis"``:
#: ``file_read``, ``shell_exec``, ``http_fetch``, ``data_parse``... (the names oasis's tool layer uses).
ToolNames = Literal["toolplan", "oasis"]


def check_names(toolset: str, names: object) -> None:
    """Refuse a ``names=`` that is neither ``"toolplan"`` nor ``"oasis"``."""
    if names not in ("toolplan", "oasis"):
        raise UserError(f"{toolset}(names={names!r}): use 'toolplan' (the default) or 'oasis'.")
