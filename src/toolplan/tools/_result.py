from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._errors import RunError
from .._records import fast_init

__all__ = ("ToolOutputError", "ToolResult")


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


class ToolOutputError(RunError):
    """A tool returned normally, but with output that cannot become JSON data (bytes that are not UTF-8).

    It breaks the tool's contract rather than failing the call's business: the step fails as an
    infrastructure error carrying this message, which says what was returned and what to return instead.
    """

    code = "invalid_tool_output"

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool
