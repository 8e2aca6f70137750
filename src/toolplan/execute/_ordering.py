"""Which resource a step's group of alternatives works on (`ToolAnnotations.resource`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..tools import ToolAnnotations

__all__ = ("resource_of",)


def resource_of(
    alternatives: tuple[tuple[str, ...], str | None], annotations: Callable[[str], ToolAnnotations]
) -> str | None:
    """The one resource a group's members name, if any.

    Members that name different resources leave the step off every chain: which member runs is
    chosen when the step starts, too late to place it.
    """
    named = {r for r in (annotations(m).resource for m in alternatives[0]) if r is not None}
    return named.pop() if len(named) == 1 else None
