from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._errors import UserError

__all__ = ("SafetyClass", "ToolAnnotations", "ToolDefinition")

#: What calling a tool may do to its environment: nothing (``read_only``), change it (``writes``), or
#: destroy data (``destructive``). Alternatives for one step must share a class (policies never swap
#: a tool that writes for one that only reads, and never choose among destructive tools).
SafetyClass: TypeAlias = Literal["read_only", "writes", "destructive"]

DEFAULT_IDEMPOTENT_RETRIES = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAnnotations:
    """How a tool behaves, for the scheduler, budgets and policies.

    Attributes:
        read_only: The tool does not change its environment (MCP ``readOnlyHint``).
        idempotent: Calling it twice with the same arguments has the effect of calling it once;
            only idempotent tools are retried automatically.
        destructive: The tool may destroy data (MCP ``destructiveHint``).
        cost: Budget units one call consumes (counted against a plan's ``max_cost``).
        timeout: Seconds one call may take before it fails as ``timed_out``; None for no limit.
        retry: Extra attempts after a failure (idempotent tools only); None means 2 for
            idempotent tools and 0 otherwise.
        concurrency: At most this many calls of the tool run at once; None for no per-tool limit.
        general: A general-purpose tool (policies may prefer it when a budget is tight).
        resource: The name of the state the tool shares with other tools (``"fs"`` for tools that
            work in one file system, a session, a device): within a run, the calls of all tools on
            one resource run one at a time, in plan order, whatever the plan's concurrency, and a
            call that fails does not stop the ones after it. None for no shared state.
        cost_of: A cost function: the budget units of one call from its arguments (the JSON object
            as the call got it, before validation). When set, it prices each call at dispatch and
            ``cost`` is only the estimate used where no call is at hand (a group's price, the
            audit, a resumed run). It must return a finite number >= 0; when it raises or returns
            anything else the call is not made and fails with error kind ``cost``.
        share_calls: Steps of one run with the same call of this tool (same arguments) make one
            call and share its result; this applies only to tools that are both ``read_only`` and
            ``idempotent``. False: each step makes its own call (a tool whose answer changes from
            one call to the next, such as a clock or a random draw).
    """

    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    cost: float = 1.0
    timeout: float | None = None
    retry: int | None = None
    concurrency: int | None = None
    general: bool = False
    resource: str | None = None
    cost_of: Callable[[Mapping[str, Any]], float] | None = field(default=None, compare=False)
    share_calls: bool = True

    def __post_init__(self) -> None:
        if self.cost < 0:
            raise UserError(f"Tool cost must be >= 0, got {self.cost}.")
        if self.cost_of is not None and not callable(self.cost_of):
            raise UserError(
                f"Tool cost_of must be a function of the call's arguments, got {type(self.cost_of).__name__}."
            )
        if self.timeout is not None and self.timeout <= 0:
            raise UserError(f"Tool timeout must be a positive number of seconds, got {self.timeout}.")
        if self.resource is not None and (not isinstance(self.resource, str) or not self.resource.strip()):
            raise UserError(f"Tool resource must be a non-empty name (such as 'fs'), got {self.resource!r}.")
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError(f"Tool concurrency must be >= 1 (or None for no limit), got {self.concurrency}.")
        if self.retry is not None:
            if self.retry < 0:
                raise UserError(f"Tool retry must be >= 0, got {self.retry}.")
            if self.retry > 0 and not self.idempotent:
                raise UserError(
                    f"retry={self.retry} needs idempotent=True: toolplan only retries tools that are safe "
                    "to call twice. Mark the tool idempotent, or let individual plan steps ask for retries."
                )

    @property
    def safety_class(self) -> SafetyClass:
        """``read_only``, ``destructive`` or ``writes`` (read_only wins, as MCP reads its hints)."""
        if self.read_only:
            return "read_only"
        return "destructive" if self.destructive else "writes"

    @property
    def retries(self) -> int:
        """Automatic extra attempts after a failure."""
        if not self.idempotent:
            return 0
        return DEFAULT_IDEMPOTENT_RETRIES if self.retry is None else self.retry


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a model sees of one tool function: name, description and JSON Schemas."""

    name: str
    description: str = ""
    parameters_json_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_json_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-able form (name, description, parameters[, output])."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters_json_schema),
        }
        if self.output_json_schema is not None:
            out["output"] = dict(self.output_json_schema)
        return out


class OneDefinition:
    """Base of the tools that expose one function, described by their ``definition``."""

    __slots__ = ()
    definition: ToolDefinition

    @property
    def name(self) -> str:
        """The tool's name as the model sees it."""
        return self.definition.name

    def definitions(self) -> Sequence[ToolDefinition]:
        """The one function this tool exposes."""
        return (self.definition,)
