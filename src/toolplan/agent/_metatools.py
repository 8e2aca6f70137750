"""The meta-tools: ``execute_tool_plan`` (native plans) and ``execute_plan`` (parallel batches).

They are ordinary `Tool` objects, so any agent loop can register them next to its own tools.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._errors import PlanValidationError
from ..execute import (
    DEFAULT_MAX_VALUE_CHARS,
    Approval,
    ApprovalCallback,
    ApprovalRule,
    EventHandler,
    PlanResult,
    RunLimits,
    RunStore,
    ToolInvoker,
)
from ..execute._internal import resumed, run_compiled
from ..plan import MAX_FALLBACK_DEPTH, META_TOOL_NAMES, Budget, Dialect, compile_plan
from ..plan._internal import BATCH_MAX_STEPS, EXPRESSION_SCHEMA
from ..tools import Tool, ToolAnnotations, ToolDefinition, ToolRegistry, ToolResult, ToolsLike

__all__ = (
    "BATCH_TOOL_NAME",
    "PLAN_TOOL_NAME",
    "BatchTool",
    "MetaCall",
    "MetaTool",
    "MetaToolBase",
    "PlanTool",
    "batch_instructions",
    "planning_instructions",
)

PLAN_TOOL_NAME = "execute_tool_plan"
BATCH_TOOL_NAME = "execute_plan"

_PLAN_DESCRIPTION = """\
Run several tool calls in ONE turn as a plan. Steps run in parallel unless one uses another's \
output; a failed step only skips the steps that depend on it. Only the outputs of `output_steps` \
come back to you.
Reference an earlier step's output inside `arguments`:
- "$ref:ID" as a whole value inserts step ID's output with its type; "$ref:ID.field.0.name" a field \
(numbers index lists).
- "{{ID.field}}" inside a string interpolates it, e.g. "Compare {{a.temp}} with {{b.temp}}".
Order without data: "depends_on": [ids] runs a step after those steps and only if they succeeded; \
"after": [ids] runs it after they ended, whatever their outcome (use it for calls on shared state, \
e.g. `cd` then `ls`, so one failure does not skip the rest). "max_concurrency": 1 runs the whole plan \
one step at a time, in plan order. Calls of tools that share state (a file system, a session) already \
run one at a time in plan order.
Conditions and computed values: {"$op": OP, "args": [operands]} is an expression over references \
and literals, usable as a step's "when" or as an argument value. "when": "$ref:ID.field" (or an \
expression) runs the step only if it is truthy; if not, the step is skipped, and so are the steps \
that use its output. E.g. "when": {"$op": ">", "args": ["$ref:stock.count", 0]}, "quantity": \
{"$op": "*", "args": ["$ref:order.qty", 3]}. OP: == != < <= > >= not all any exists + - * / // % \
min max length concat.
Ids use letters, digits, '_' and '-'. Invalid plans run nothing and list every problem to fix.\
"""

_BATCH_DESCRIPTION = f"""\
Run up to {BATCH_MAX_STEPS} independent tool calls in parallel in ONE turn. No step can use \
another's output (use execute_tool_plan for that). Returns a JSON array with one entry per step, \
in order: {{"step", "tool", "status": "ok"|"error", "result"|"error"}}.\
"""


def planning_instructions(tool_names: Sequence[str] = ()) -> str:
    """The short system-prompt section that tells a model when and how to plan."""
    tools = f" (any of: {', '.join(tool_names)})" if tool_names else ""
    return (
        "## Tool plans\n"
        f"When a task needs several tool calls{tools}, especially calls that depend on each other's "
        f"results, call `{PLAN_TOOL_NAME}` once with every step instead of calling tools one by one: "
        "independent steps run in parallel, dependent ones start as soon as their inputs are ready, "
        "and you get back only the outputs you list in `output_steps`.\n"
        'Example: {"steps": [{"id": "a", "tool": "get_weather", "arguments": {"city": "Oslo"}}, '
        '{"id": "b", "tool": "get_weather", "arguments": {"city": "Rome"}}, '
        '{"id": "c", "tool": "compare", "arguments": {"x": "$ref:a.temp", "y": "$ref:b.temp"}}], '
        '"output_steps": ["c"]}\n'
        "For a single call, or when the next call depends on judging a result, call tools directly. "
        "If the plan is rejected, fix every listed problem and send the whole plan again."
    )


#: Up to this many tools, the plan schema spells out each tool's arguments (a step is one of
#: ``{"tool": NAME, "arguments": <NAME's parameters>}``), so test models that generate arguments from
#: the schema (pydantic-ai's ``TestModel``) and models with structured outputs produce valid plans.
#: With more tools the schema only names them (an enum) and leaves ``arguments`` open, to stay small.
DETAILED_PLAN_SCHEMA_MAX_TOOLS = 8


def _plan_schema(
    tool_names: Sequence[str],
    *,
    alternatives: bool = False,
    parameters: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The native plan's JSON Schema.

    With ``alternatives``, a step's tool may be ``{"one_of": [...]}``. With ``parameters`` (each
    tool's parameters schema) and at most `DETAILED_PLAN_SCHEMA_MAX_TOOLS` tools, a step is one of
    the tools with that tool's arguments.
    """
    tool_schema: dict[str, Any] = {"type": "string", "description": "Name of the tool to call."}
    if tool_names:
        tool_schema["enum"] = list(tool_names)
    step_tool = tool_schema
    if alternatives:  # the registry has groups of alternatives: a step may name its own
        step_tool = {
            "anyOf": [
                tool_schema,
                {
                    "type": "object",
                    "properties": {"one_of": {"type": "array", "items": tool_schema, "minItems": 2}},
                    "required": ["one_of"],
                    "description": "Interchangeable tools (same arguments): toolplan chooses which one runs.",
                },
            ]
        }
    call = {
        "type": "object",
        "properties": {
            "tool": tool_schema,
            "arguments": {"type": "object", "description": "The tool's arguments; may contain references."},
        },
        "required": ["tool", "arguments"],
    }
    options = {
        "depends_on": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Steps that must succeed first even though no output is used.",
        },
        "after": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Steps that must have ended first, whatever their outcome: for calls on shared state "
            "that must keep their order even when one fails.",
        },
        "when": {
            "anyOf": [
                {"type": "string", "description": '"$ref:ID.field": run the step only if it is truthy.'},
                EXPRESSION_SCHEMA,
                {"type": "boolean"},
            ],
            "description": "A condition: if it is false when the step is due, the step is skipped.",
        },
        "timeout": {"type": "number", "description": "Seconds before the step fails."},
        "retry": {"type": "integer", "description": "Extra attempts if the step fails."},
        "fallback": {
            **call,
            "description": "A call whose result replaces the step's if it fails; it may have its own "
            f'"fallback", a chain of at most {MAX_FALLBACK_DEPTH}.',
        },
    }

    def step(tool: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "description": "Unique step id."},
                "tool": tool,
                "arguments": arguments,
                **options,
            },
            "required": ["id", "tool", "arguments"],
        }

    open_arguments = {
        "type": "object",
        "description": 'The tool\'s arguments; values may be "$ref:ID.path", contain "{{ID.path}}", or be '
        'computed: {"$op": OP, "args": [...]}.',
    }
    defs: dict[str, Any] = {}
    if parameters is not None and 0 < len(tool_names) <= DETAILED_PLAN_SCHEMA_MAX_TOOLS:
        variants = [
            step(
                {"type": "string", "const": name, "description": "Name of the tool to call."},
                _tool_arguments_schema(name, parameters.get(name), defs) or open_arguments,
            )
            for name in tool_names
        ]
        if alternatives:
            variants.append(step(step_tool, open_arguments))
        items: dict[str, Any] = {"anyOf": variants}
    else:
        items = step(step_tool, open_arguments)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "steps": {"type": "array", "items": items, "minItems": 1},
            "output_steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids whose outputs you need back (default: all).",
            },
            "goal": {"type": "string", "description": "What the plan is for (for logs)."},
            "max_concurrency": {
                "type": "integer",
                "minimum": 1,
                "description": "Most steps running at once; 1 runs the steps one at a time, in plan order.",
            },
            "share_calls": {
                "type": "boolean",
                "description": "false: repeated identical calls of read-only tools each run (default: made once).",
            },
        },
        "required": ["steps"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


_LOCAL_DEFS = ("#/$defs/", "#/definitions/")


def _tool_arguments_schema(
    name: str, parameters: Mapping[str, Any] | None, defs: dict[str, Any]
) -> dict[str, Any] | None:
    """``name``'s parameters schema as a plan step's ``arguments``; its definitions move into ``defs``.

    None when the schema cannot be embedded (a ``$ref`` other than into its own definitions).
    """
    if parameters is None:
        return None
    own = {**dict(parameters.get("definitions") or {}), **dict(parameters.get("$defs") or {})}
    renamed = {key: f"{name}__{key}" for key in own}

    def move(node: Any) -> Any:
        if isinstance(node, Mapping):
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    prefix = next((p for p in _LOCAL_DEFS if value.startswith(p)), None)
                    target = value[len(prefix) :] if prefix is not None else None
                    if target not in renamed:
                        raise LookupError(value)
                    out[key] = f"#/$defs/{renamed[target]}"
                else:
                    out[key] = move(value)
            return out
        if isinstance(node, list):
            return [move(v) for v in node]
        return node

    try:
        body: dict[str, Any] = move({k: v for k, v in parameters.items() if k not in ("$defs", "definitions", "title")})
        moved = {renamed[key]: move(value) for key, value in own.items()}
    except LookupError:
        return None
    defs.update(moved)
    body.setdefault("type", "object")
    body["description"] = (
        f'The arguments of {name}; any value may instead be a reference: "$ref:ID.path" (the whole value) '
        'or "{{ID.path}}" inside a string, or a computed value {"$op": OP, "args": [...]}.'
    )
    return body


def _batch_schema(tool_names: Sequence[str]) -> dict[str, Any]:
    tool_schema: dict[str, Any] = {"type": "string"}
    if tool_names:
        tool_schema["enum"] = list(tool_names)
    return {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "maxItems": BATCH_MAX_STEPS,
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {"tool": tool_schema, "args": {"type": "object"}},
                    "required": ["tool", "args"],
                },
            }
        },
        "required": ["steps"],
    }


def batch_instructions() -> str:
    """The short system-prompt section that tells a model when to send a parallel batch."""
    return (
        "## Parallel batches\n"
        f"When you need several calls that do not use each other's results, call `{BATCH_TOOL_NAME}` "
        f"once with all of them (at most {BATCH_MAX_STEPS}): they run in parallel and you get one JSON "
        'array back, an entry per call in your order. Example: {"steps": [{"tool": "get_weather", '
        '"args": {"city": "Oslo"}}, {"tool": "get_weather", "args": {"city": "Rome"}}]}'
    )


@runtime_checkable
class MetaTool(Tool, Protocol):
    """A tool that runs other tools (a plan, code); the agent loop gives it the run's invoker."""

    @property
    def name(self) -> str:
        """The meta-tool's name."""
        ...

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        invoker: ToolInvoker,
        on_event: EventHandler | None = None,
        expires: float | None = None,
        store: RunStore | None = None,
        parent: str | None = None,
    ) -> tuple[str, bool, PlanResult | None]:
        """Run; return (text for the model, is_error, the record of the tool calls made).

        ``invoker`` is the agent run's (its budget and the tools' slots are shared by everything
        the run does); ``expires`` is the run's deadline (`time.monotonic`); ``store`` and
        ``parent`` are the agent's store and run id, for meta-tools whose runs are stored.
        """
        ...


@dataclass(frozen=True, slots=True)
class MetaCall:
    """What the agent run gives one call of a built-in meta-tool; all unset for a plain tool call.

    The first fields are `MetaTool.call`'s keywords (``invoker`` None: outside an agent run), then the
    run's approval rule and callback; ``resume`` (a plan that waited for approval) and ``approvals``
    (the answers to it) only the plan tools use. `MetaToolBase.call` makes it from its keywords, in
    this order.
    """

    invoker: ToolInvoker | None = None
    on_event: EventHandler | None = None
    expires: float | None = None
    store: RunStore | None = None
    parent: str | None = None
    approval: ApprovalRule | None = None
    on_approval: ApprovalCallback | None = None
    resume: PlanResult | None = None
    approvals: Mapping[str, Approval] | None = None


class MetaToolBase(ABC):
    """`MetaTool.call` and `Tool.execute` written once for the built-in meta-tools: each writes `answer`."""

    _name: str

    @property
    def name(self) -> str:
        """The meta-tool's name."""
        return self._name

    @abstractmethod
    async def answer(self, arguments: Mapping[str, Any], ctx: MetaCall) -> tuple[str, bool, PlanResult | None]:
        """One call: (text for the model, is_error, the record of the tool calls made)."""

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """The tool called on its own, outside an agent run: its answer, a failed call when it is an error."""
        text, is_error, _ = await self.answer(arguments, MetaCall())
        return ToolResult.failure(text) if is_error else ToolResult(text)

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        invoker: ToolInvoker,
        on_event: EventHandler | None = None,
        expires: float | None = None,
        store: RunStore | None = None,
        parent: str | None = None,
        approval: ApprovalRule | None = None,
        on_approval: ApprovalCallback | None = None,
        resume: PlanResult | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> tuple[str, bool, PlanResult | None]:
        """`MetaTool.call`, with the run's approval rule and callback (and a plan to resume, for plan tools)."""
        ctx = MetaCall(invoker, on_event, expires, store, parent, approval, on_approval, resume, approvals)
        return await self.answer(arguments, ctx)


class _MetaTool(MetaToolBase):
    """Shared machinery: a registry of callable tools (meta-tools excluded) and the run's limits.

    Args:
        tools: The tools a plan may call.
        limits: Limits of each plan run (the plan's own merge in; the tighter wins). Inside an agent
            run, the agent's budget and deadline apply on top.
        max_concurrency, timeout, step_timeout, budget, max_steps: Override those fields of ``limits``
            (``timeout`` is ``RunLimits.deadline``).
        max_value_chars: Longest value (and error) in the text returned to the model.
    """

    _dialect: Dialect
    _description: str

    def __init__(
        self,
        tools: ToolsLike,
        *,
        limits: RunLimits | None = None,
        max_concurrency: int | None = None,
        timeout: float | None = None,
        step_timeout: float | None = None,
        budget: Budget | None = None,
        max_steps: int | None = None,
        max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
        on_event: EventHandler | None = None,
        on_result: Callable[[PlanResult], None] | None = None,
        store: RunStore | None = None,
    ) -> None:
        registry = ToolRegistry.of(tools)
        self.registry = registry.without(*META_TOOL_NAMES)
        self.limits = RunLimits.of(
            limits,
            max_concurrency=max_concurrency,
            deadline=timeout,
            step_timeout=step_timeout,
            budget=budget,
            max_steps=max_steps,
        )
        self.max_value_chars = max_value_chars
        self.on_event = on_event
        self.on_result = on_result
        self.store = store  # each plan's run is stored (durable) when set

    def definitions(self) -> Sequence[ToolDefinition]:
        """The one function this meta-tool offers, with the schema the model sees."""
        # With deferred tools the model may name any it found: no list of names.
        names = [] if self.registry.deferred_names else self.registry.names
        if self._dialect == "native":
            schema = _plan_schema(names, alternatives=bool(self.registry.groups))
        else:
            schema = _batch_schema(names)
        return (
            ToolDefinition(
                name=self._name,
                description=self._description,
                parameters_json_schema=schema,
                annotations=ToolAnnotations(cost=0.0),
            ),
        )

    async def run(
        self,
        plan: Any,
        *,
        invoker: ToolInvoker | None = None,
        on_event: EventHandler | None = None,
        expires: float | None = None,
        store: RunStore | None = None,
        parent: str | None = None,
        approval: ApprovalRule | None = None,
        on_approval: ApprovalCallback | None = None,
        resume: PlanResult | None = None,
        approvals: Mapping[str, Approval] | None = None,
        run_id: str | None = None,
    ) -> PlanResult:
        """Validate and run ``plan``; raises `PlanValidationError` when it is invalid.

        Pass ``invoker`` to share its budget and per-tool limits with other calls (an agent run),
        ``expires`` for the enclosing run's deadline (`time.monotonic`), ``store`` to store the
        plan's run (durably) under ``parent`` (the agent run's id), and ``run_id`` to name the run.
        ``approval``, ``on_approval``, ``resume`` and ``approvals`` are `execute_plan`'s.
        """
        limits = self.limits
        compiled = compile_plan(plan, self.registry, dialect=self._dialect, max_steps=limits.max_steps)
        # Inside an agent run, the run's invoker: its budget binds, and so does this tool's own.
        invoker = (
            ToolInvoker.for_limits(self.registry, limits) if invoker is None else invoker.with_budget(limits.budget)
        )
        gate, stored = resumed(compiled, self.registry, approval, on_approval, resume, approvals)
        result = await run_compiled(
            compiled,
            invoker,
            limits,
            on_event or self.on_event,
            store if store is not None else self.store,
            run_id,
            parent=parent,
            expires=expires,
            expires_note="the agent run's deadline",
            approval=gate,
            resume=stored,
        )
        if self.on_result is not None:
            self.on_result(result)
        return result

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run the plan in ``arguments``; an invalid plan is a failed call listing every problem."""
        try:
            result = await self.run(dict(arguments))
        except PlanValidationError as exc:
            return ToolResult.failure(exc.message, content=exc.to_dict())
        return ToolResult(result.to_model_text(max_value_chars=self.max_value_chars))

    async def answer(self, arguments: Mapping[str, Any], ctx: MetaCall) -> tuple[str, bool, PlanResult | None]:
        """Run the plan; an invalid plan is an error listing every problem.

        A plan that waits for approval returns its result (``ctx.approval`` and the rest as in `run`).
        """
        try:
            result = await self.run(
                dict(arguments),
                invoker=ctx.invoker,
                on_event=ctx.on_event,
                expires=ctx.expires,
                store=ctx.store,
                parent=ctx.parent,
                approval=ctx.approval,
                on_approval=ctx.on_approval,
                resume=ctx.resume,
                approvals=ctx.approvals,
            )
        except PlanValidationError as exc:
            return exc.message, True, None
        return result.to_model_text(max_value_chars=self.max_value_chars), False, result


class PlanTool(_MetaTool):
    """The ``execute_tool_plan`` meta-tool: a native plan with references, run as a DAG."""

    _name = PLAN_TOOL_NAME
    _dialect: Dialect = "native"
    _description = _PLAN_DESCRIPTION


class BatchTool(_MetaTool):
    """The ``execute_plan`` meta-tool: up to 50 independent calls in parallel."""

    _name = BATCH_TOOL_NAME
    _dialect: Dialect = "batch"
    _description = _BATCH_DESCRIPTION
