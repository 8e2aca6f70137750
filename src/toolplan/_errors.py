"""toolplan's exceptions: one tree, each with a stable ``code``.

```
ToolplanError                      root; every error toolplan raises on purpose
├── UserError                      the developer misused the API (fix the code, not the model)
│   ├── OptionalDependencyError    an extra is not installed; the message names the pip command
│   ├── CliInputError              a command-line input (file, option, tools spec) is unusable (toolplan.cli)
│   ├── ApprovalError              answers to a run that waits for approval cannot be used; `.problems` by step
│   ├── InvalidToolSchemaError     a tool's parameters schema cannot be used (its path is named)
│   ├── OpenAPISpecError           an OpenAPI document cannot be loaded or read (toolplan.builtin.OpenAPIToolset)
│   └── UncacheableToolError       a result cache was set up for a tool that is not read_only
├── ModelFacingError               a signal the model can act on (it is shown to the model)
│   ├── PlanValidationError        a plan is invalid; `.issues` lists every problem; zero tools ran
│   │   └── StreamedPlanInvalid    a streamed plan turned out invalid after some steps started; `.result`
│   ├── ReferenceResolutionError   a reference's value cannot be handed to the step that reads it
│   └── ToolError                  a tool call failed (raised inside tools or code to fail a call)
│       ├── InvalidArgumentsError  the arguments do not match the tool's schema
│       └── UnknownToolError       a call named a tool that is not registered
├── RunError                       a run failed for a reason outside the model's control
│   ├── ToolOutputError            a tool returned output that cannot become JSON data (binary bytes)
│   ├── UsageLimitExceeded         a run hit max_iterations, its deadline, budget or a spend cap; `.result`, `.usage`
│   ├── ModelHTTPError             a model provider answered with an error status
│   │   └── ModelAuthError         the provider rejected the credentials (never retried)
│   ├── ModelConnectionError       the provider could not be reached or timed out
│   ├── UnexpectedModelBehavior    a model (or test model) did something the run cannot continue with
│   │   └── OutputValidationError  the final answer did not match output_type, output_retries times
│   ├── SandboxError               a code runner failed or killed the code (the limit is named)
│   ├── WorkerDiedError            the remote worker running a call died (a distributed backend)
│   ├── MCPConnectionError         an MCP server could not be reached, or its connection failed (toolplan.mcp)
│   └── StoreError                 the store (database) failed or refused; durable runs stop, resumable
│       ├── RunNotFoundError       no stored run has that id
│       ├── PlanNotFoundError      no stored plan or planning request has that id
│       ├── RunConflictError       the run id is taken: another plan, or another live process runs it
│       └── ConcurrencyLimitError  an API key has as many executions queued or running as it may (service)
└── ServiceError                   a planner service answered with an error, or was unreachable (client)
```

A timeout or a spent budget is not an exception: the step's record says so (error kinds
``timeout`` and ``limit``), and an agent run that cannot go on raises `UsageLimitExceeded`.

Outside the tree, on purpose (each named here so that the list is whole):

```
ApiError (Exception)               the service's error answer (HTTP status, code): answered, never raised to a caller
SearchProviderError (RuntimeError) the web search provider's answer is not its documented JSON: the call fails
ToolCallError (RuntimeError)       inside code run in the sandbox: a tool the code called failed (the code may catch it)
JSONTextError (ValueError)         JSON text toolplan cannot read; each reader turns it into its own error
```

Internal signals, caught in the module that raises them and never seen by a caller: the sandbox's
``ProtocolViolation``, ``DataError``, ``DataTooLarge``, ``MessageTooLarge``, ``TruncatedFrame`` and
``_Stop``; Ray code runs' ``WorkerGone`` and ``_Refused``; the agent's ``OutputValidationFailed``;
references' ``_TooDeep``; expressions' ``ExpressionFailed`` (caught by the executor: a step error of
kind ``invalid_expression``); the OpenAPI reader's ``_Skip`` (an operation left out); the data tools'
bounded query's ``QueryBoundError`` and ``_Over``; the service's ``_TooLarge``; the store codec's
``_NotPlain``.

Messages say what happened and then what to do about it. Constructors have no side effects.

The classes are defined here but public as ``toolplan.<Name>``: their ``__module__`` says so (as in
httpx and anyio), which is what tracebacks and pickle use. Every error survives a pickle round trip
with its attributes (errors cross process boundaries in code mode and in distributed backends):
``ToolplanError.__reduce__`` rebuilds an instance from its ``args`` and ``__dict__`` without calling
``__init__``, so subclasses with their own constructor arguments need nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = (
    "ApprovalError",
    "ConcurrencyLimitError",
    "InvalidArgumentsError",
    "InvalidToolSchemaError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelFacingError",
    "ModelHTTPError",
    "OpenAPISpecError",
    "OptionalDependencyError",
    "OutputValidationError",
    "PlanIssue",
    "PlanNotFoundError",
    "PlanValidationError",
    "ReferenceResolutionError",
    "RunError",
    "RunConflictError",
    "RunNotFoundError",
    "SandboxError",
    "ServiceError",
    "StoreError",
    "ToolError",
    "ToolOutputError",
    "ToolplanError",
    "UncacheableToolError",
    "UnexpectedModelBehavior",
    "UnknownToolError",
    "UsageLimitExceeded",
    "UserError",
    "WorkerDiedError",
)


class ToolplanError(Exception):
    """Root of every error toolplan raises on purpose."""

    code: ClassVar[str] = "toolplan_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # The default reduction calls ``type(self)(*self.args)``, which breaks for every subclass whose
        # constructor takes other arguments than the message (or keyword-only ones).
        return (_rebuild, (type(self), self.args, self.__dict__))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able ``{"code", "message"}`` for boundaries (CLI, service, model)."""
        return {"code": self.code, "message": self.message}


class UserError(ToolplanError):
    """The developer used the API wrongly; the message says how to call it instead."""

    code = "user_error"


class OptionalDependencyError(UserError, ImportError):
    """An optional extra is missing; the message names the ``pip install`` command."""

    code = "missing_dependency"

    def __init__(self, feature: str, extra: str, *, package: str | None = None) -> None:
        what = f" (package {package!r})" if package else ""
        super().__init__(
            f"{feature} needs an optional dependency{what} that is not installed. "
            f'Install it with: pip install "toolplan[{extra}]"'
        )
        self.extra = extra


class ApprovalError(UserError):
    """Answers given to a run that waits for approval cannot be used; nothing ran.

    ``problems`` maps each step id to what is wrong with its answer (a step that does not wait, an
    edit that does not fit the tool's schema).
    """

    code = "invalid_approval"

    def __init__(self, problems: Mapping[str, str]) -> None:
        listed = "; ".join(f"{sid}: {p}" if sid else p for sid, p in problems.items())
        super().__init__(f"The approval answers cannot be used ({listed}). Fix them and resume again.")
        self.problems = dict(problems)

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "problems"}``."""
        return {**super().to_dict(), "problems": dict(self.problems)}


class InvalidToolSchemaError(UserError):
    """A tool's parameters schema cannot be used; ``path`` is where in the schema (``/properties/a/type``)."""

    code = "invalid_tool_schema"

    def __init__(self, detail: str, *, path: str, tool: str | None = None) -> None:
        who = f"tool {tool!r}" if tool else "a tool"
        super().__init__(
            f"The parameters schema of {who} cannot be used, at {path or '/'}: {detail}. Fix the schema "
            "(toolplan reads JSON Schema 2020-12 and the common dialects: see docs/tools.md), or leave the tool out."
        )
        self.detail = detail
        self.path = path
        self.tool = tool


class OpenAPISpecError(UserError):
    """An OpenAPI document cannot be used: not found, not JSON or YAML, not OpenAPI 3.0/3.1, or beyond the bounds."""

    code = "invalid_openapi_spec"


class UncacheableToolError(UserError):
    """A `ResultCache` names a tool that is not ``read_only``: its results must never be reused across runs."""

    code = "uncacheable_tool"

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"The result cache sets a time to live for tool {tool!r}, which is not marked read_only: a call "
            "that may change something must run every time. Leave the tool out of the cache's 'tools', or mark "
            "it read_only if calling it changes nothing."
        )
        self.tool = tool


class ModelFacingError(ToolplanError):
    """An error whose message is meant for the model, so it can repair its next move."""

    code = "model_facing_error"


Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanIssue:
    """One problem found in a plan: a stable code, the step it concerns and an actionable sentence."""

    code: str
    message: str
    step: str | None = None
    severity: Severity = "error"

    def to_dict(self, *, severity: bool = False) -> dict[str, Any]:
        """``{"code", "step", "message"}``: the form the CLI and the model see.

        With ``severity=True``, its ``"severity"`` too: the form the service and stored results use.
        """
        out: dict[str, Any] = {"code": self.code, "step": self.step, "message": self.message}
        if severity:
            out["severity"] = self.severity
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, severity: Severity = "error") -> PlanIssue:
        """An issue from `to_dict`'s form, or from that form with its ``"severity"`` (``severity`` when absent)."""
        found = data.get("severity", severity)
        return cls(
            code=data["code"],
            message=data["message"],
            step=data.get("step"),
            severity="warning" if found == "warning" else "error",
        )

    def __str__(self) -> str:
        where = f"step {self.step!r}: " if self.step is not None else ""
        return f"[{self.code}] {where}{self.message}"


class PlanValidationError(ModelFacingError):
    """A plan is invalid. ``issues`` lists every problem at once; no tool has run."""

    code = "invalid_plan"

    def __init__(self, issues: Sequence[PlanIssue]) -> None:
        self.issues: tuple[PlanIssue, ...] = tuple(i for i in issues if i.severity == "error")
        self.warnings: tuple[PlanIssue, ...] = tuple(i for i in issues if i.severity == "warning")
        n = len(self.issues)
        lines = "\n".join(f"- {issue}" for issue in self.issues)
        super().__init__(
            f"The plan is invalid ({n} problem{'s' if n != 1 else ''}); no tool was called. "
            f"Fix every problem below and submit the whole plan again:\n{lines}"
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"status": "invalid", "errors": [...]}`` as the CLI and the model see it."""
        return {
            "status": "invalid",
            "errors": [i.to_dict() for i in self.issues],
            "warnings": [i.to_dict() for i in self.warnings],
        }


class ReferenceResolutionError(ModelFacingError):
    """A reference's value cannot be handed to the step that reads it.

    The referenced step succeeded, but what it produced cannot be inserted: JSON text nested too
    deep or holding a number too long to read, a value that contains itself, an integer too long to
    write into a string. The reading step fails (error kind ``"reference"``) and its dependents are
    skipped; nothing else in the run is affected.

    Attributes:
        reference: The reference as written in the plan (``"$ref:page.0"``, ``"{{a}}"``).
        source_step: The id of the step whose output was read.
    """

    code = "unresolvable_reference"

    def __init__(self, message: str, *, reference: str, source_step: str) -> None:
        super().__init__(message)
        self.reference = reference
        self.source_step = source_step


class ToolError(ModelFacingError):
    """A tool call failed. Raise it from a tool to fail the call with a message for the model."""

    code = "tool_error"

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class InvalidArgumentsError(ToolError):
    """The arguments of a call do not match the tool's schema."""

    code = "invalid_arguments"


class UnknownToolError(ToolError):
    """A call named a tool that is not registered."""

    code = "unknown_tool"

    def __init__(self, name: str, known: Sequence[str]) -> None:
        listing = ", ".join(sorted(known)) or "(none)"
        shown = repr(name) if len(name) <= 100 else f"{name[:80]!r}… ({len(name)} characters)"  # the model's text
        super().__init__(f"Unknown tool {shown}. Known tools: {listing}.", tool=name)


class RunError(ToolplanError):
    """A run failed for a reason outside the model's control."""

    code = "run_error"


class ToolOutputError(RunError):
    """A tool returned normally, but with output that cannot become JSON data (bytes that are not UTF-8).

    It breaks the tool's contract rather than failing the call's business: the step fails as an
    infrastructure error carrying this message, which says what was returned and what to return instead.
    """

    code = "invalid_tool_output"

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class UsageLimitExceeded(RunError):
    """An agent run stopped at a limit before the model gave its final answer.

    Raised when the run reaches ``max_iterations`` model requests, when the model asks for more
    tool calls after the run's deadline has passed or its budget (``max_tool_calls``, ``max_cost``)
    is spent, or at a model spend cap (`toolplan.SpendLimits`: before a request whose known input
    would pass it, after a response that passed it; a planner's too). ``limit`` names the limit
    (``"max_total_tokens"``, ``"max_money"``, ``"key_spend"`` for an API key's window, ...);
    ``result`` is the partial `AgentResult` (the conversation, usage, plan results so far; its
    ``output`` is the last text, or None for a structured output); ``usage`` (a
    `toolplan.models.Usage`: tokens by kind) and ``money`` (None without a price) say what the run
    spent on its model. ``Agent(..., on_limit="return")`` returns the partial result instead, and
    keeps the earlier behaviour for tool calls: calls past the deadline or budget are refused (the
    model is told) and ``max_iterations`` ends the run with a status.
    """

    code = "usage_limit_exceeded"
    result: Any = None  # the partial AgentResult, set by the agent (this module cannot import it)
    usage: Any = None  # the Usage spent on the model so far (this module cannot import it)
    money: float | None = None  # the money spent on the model, when its price is known

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class ModelHTTPError(RunError):
    """A model provider answered with an error status."""

    code = "model_http_error"

    def __init__(self, message: str, *, status_code: int, model_name: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.model_name = model_name


class ModelAuthError(ModelHTTPError):
    """The provider rejected the credentials; check the API key. Never retried."""

    code = "model_auth_error"


class ModelConnectionError(RunError):
    """The provider could not be reached or did not answer in time."""

    code = "model_connection_error"


class UnexpectedModelBehavior(RunError):
    """A model did something the run cannot continue with (malformed output, exhausted script, ...)."""

    code = "unexpected_model_behavior"


class OutputValidationError(UnexpectedModelBehavior):
    """The model's final answer did not validate against the agent's ``output_type``, after every retry.

    ``result`` is the partial `AgentResult` (its ``output`` is None; the conversation shows each try).
    """

    code = "invalid_output"
    result: Any = None  # the partial AgentResult, set by the agent


class SandboxError(RunError):
    """A code runner failed or killed the code; ``limit`` names the limit that was hit, if any."""

    code = "sandbox_error"

    def __init__(self, message: str, *, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class WorkerDiedError(RunError):
    """The process running a tool call on another machine or process (a Ray worker) died mid-call.

    Raised by distributed backends. Whether the call had its effect is unknown: ``outcome_unknown``
    is True when the tool is not read-only or idempotent, and the step then ends ``unknown_outcome``
    (never called again); a read-only or idempotent tool's call fails as ``infrastructure`` and is
    retried like any other infrastructure failure, with the same idempotency key.
    """

    code = "worker_died"

    def __init__(self, message: str, *, tool: str | None = None, outcome_unknown: bool = True) -> None:
        super().__init__(message)
        self.tool = tool
        self.outcome_unknown = outcome_unknown


class StoreError(RunError):
    """The store failed (the database cannot be reached, a write did not commit, the schema is newer).

    A durable run that meets it starts no more steps; what committed stays, and the run can be resumed.
    """

    code = "store_error"


class RunNotFoundError(StoreError):
    """No run with this id is stored; ``toolplan runs list`` shows the stored ones."""

    code = "run_not_found"

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class PlanNotFoundError(StoreError):
    """No plan (or planning request) with this id is stored."""

    code = "plan_not_found"

    def __init__(self, message: str, *, plan_id: str) -> None:
        super().__init__(message)
        self.plan_id = plan_id


class RunConflictError(StoreError):
    """The run id is taken: it holds another plan, or another live process is running it."""

    code = "run_conflict"

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class ConcurrencyLimitError(StoreError):
    """An API key has as many executions queued or running as it may: wait for one, or cancel one."""

    code = "too_many_executions"


class ServiceError(ToolplanError):
    """A planner service answered with an error, or could not be reached (`toolplan.client`).

    Attributes:
        code: The service's stable code (``"run_not_found"``, ``"invalid_plan"``, ``"unauthorized"``,
            ...); ``"unreachable"`` when no answer came after the client's retries.
        message: The service's message, which says what to do.
        details: The answer's ``details`` (every issue of an invalid plan, say), or None.
        status: The HTTP status, or None when there was no answer.
    """

    code = "service_error"

    def __init__(self, code: str, message: str, details: Any = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]  # the service's code, per instance
        self.details = details
        self.status = status

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"[{where}{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "details"}``: the body the service answered."""
        return {"code": self.code, "message": self.message, "details": self.details}


def _rebuild(cls: type[ToolplanError], args: tuple[Any, ...], state: dict[str, Any]) -> ToolplanError:
    """Unpickle an error: ``args`` and attributes as they were, ``__init__`` not called."""
    error = cls.__new__(cls, *args)
    error.__dict__.update(state)
    return error


# Public paths in tracebacks, reprs and pickles: ``toolplan.UserError``, not ``toolplan._errors.UserError``.
# Every name in ``__all__`` must therefore be exported by ``toolplan`` itself (tests/test_package.py checks).
for _name in __all__:
    globals()[_name].__module__ = "toolplan"
del _name
