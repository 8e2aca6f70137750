from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._records import fast_init

__all__ = ("ToolResult",)


@fast_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call.

    ``error`` set means a *business* error (a city that does not exist, a record that is locked):
    the call completed but did not succeed, and its step fails. Exceptions raised by a tool are
    *infrastructure* errors and are reported as such. Never signal an error by a string prefix.
    """

    content: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None

    @classmethod
    def failure(cls, message: str, content: Any = None) -> ToolResult:
        """A business error with a message the model can act on."""
        return cls(content=content, error=message)
