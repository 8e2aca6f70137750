"""How the tool calls of one model turn run: concurrently (native) or one at a time (sequential).

`NativeExecutor` and `SequentialExecutor` also take an agent (``NativeExecutor(agent).execute(task)``):
then they run that agent on a task with their strategy, as thin wrappers over `Agent.run`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, overload

from typing_extensions import deprecated

from .._errors import ToolError, UnknownToolError, UserError
from .._json import dumps, encodable
from .._tasks import task_group
from ..execute import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_VALUE_CHARS,
    ApprovalCallback,
    ApprovalRule,
    PlanEvent,
    PlanResult,
    RunLimits,
    RunStore,
    StepFinished,
    StepResult,
    StepStarted,
    ToolInvoker,
)
from ..execute._internal import ApprovalGate, PlanRun
from ..models import ModelMessage, ToolCall, ToolReturnMessage
from ..plan._internal import compile_calls
from ..tools import ToolRegistry
from ._code import CodeTool
from ._events import AgentEvent, ToolExecutionFinished, ToolExecutionStarted
from ._metatools import MetaTool, _MetaTool

if TYPE_CHECKING:
    from ._result import AgentResult

__all__ = (
    "ExecutionStrategy",
    "NativeExecutor",
    "SequentialExecutor",
    "ToolCallExecutor",
    "TurnContext",
    "create_executor",
    "tool_content",
)


class _HasConcurrency(Protocol):
    @property
    def max_concurrent_tools(self) -> int: ...


class _Wrapped(_HasConcurrency, Protocol):
    """What an executor uses of the agent it wraps (a toolplan `Agent`): a copy with its turn options, and run."""

    def _with_turns(
        self, *, strategy: ExecutionStrategy, max_concurrent_tools: int | None, max_tool_calls_per_turn: int | None
    ) -> _Wrapped: ...

    async def run(
        self, prompt: str, *, message_history: Sequence[ModelMessage] = ..., deps: Any = ...
    ) -> AgentResult[Any]: ...


class ExecutionStrategy(StrEnum):
    """How an agent runs the tool calls of one model turn."""

    NATIVE = "native"
    SEQUENTIAL = "sequential"


@dataclass(slots=True, kw_only=True)
class TurnContext:
    """What the executor needs from the running agent.

    ``invoker`` holds the run's one budget ledger and the tools' slots; ``expires`` is the run's
    deadline (`time.monotonic`), which every call, plan and code run of the run shares.
    """

    registry: ToolRegistry
    meta_tools: Mapping[str, MetaTool]
    invoker: ToolInvoker
    max_tool_calls_per_turn: int
    limits: RunLimits = DEFAULT_LIMITS
    expires: float | None = None
    emit: Callable[[AgentEvent], None] | None = None
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS
    plan_results: list[PlanResult] = field(default_factory=list[PlanResult])
    store: RunStore | None = None  # the agent's store: each plan it runs is stored, under ``run_id``
    run_id: str = ""
    call_results: list[PlanResult] = field(default_factory=list[PlanResult])  # the turns' direct calls
    traced: bool = False  # the run is traced (OpenTelemetry): plans say which tool call they are
    approval: ApprovalRule | None = None  # steps of the run's plans that need a person's answer
    on_approval: ApprovalCallback | None = None
    # Plans of this turn that wait for approval: tool call id -> (the plan's arguments, its result).
    waiting: dict[str, tuple[dict[str, Any], PlanResult]] = field(default_factory=dict[str, Any])

    async def call_meta(
        self, meta: MetaTool, args: Mapping[str, Any], **more: Any
    ) -> tuple[str, bool, PlanResult | None]:
        """Run a meta-tool with this run's invoker, events, deadline and store (``more``: its own options)."""
        return await meta.call(
            args,
            invoker=self.invoker,
            on_event=self.emit,
            expires=self.expires,
            store=self.store,
            parent=self.run_id or None,
            **more,
        )


def tool_content(value: Any) -> str:
    """What the model reads for a tool's output: strings as they are, anything else as JSON.

    The JSON is always valid and encodable (`toolplan._json.dumps`): ``NaN`` and infinities as
    strings, a value that contains itself cut, lone surrogates replaced (in strings too).
    """
    if isinstance(value, str):
        return encodable(value)
    return dumps(value)


def _error_message(call: ToolCall, message: str) -> ToolReturnMessage:
    return ToolReturnMessage(tool_call_id=call.id, name=call.name, content=f"Error: {message}", is_error=True)


class ToolCallExecutor:
    """Runs a turn's calls through the plan engine (same limits, retries, timeouts and budget as plans).

    Given an ``agent``, it also runs that agent on a task (`execute` with a string, `run`) with this
    executor's strategy, ``max_concurrency`` and ``max_tool_calls_per_turn``; the agent is not changed.
    """

    def __init__(
        self,
        *,
        max_concurrency: int,
        agent: _Wrapped | None = None,
        max_tool_calls_per_turn: int | None = None,
        resilience: bool = True,
    ) -> None:
        if resilience is not True:
            raise UserError(
                "resilience=False is not an executor option here: toolplan's models retry rate limits and other "
                "transient failures themselves. To turn that off, give the model retry=RetryConfig(attempts=1) "
                "(toolplan.models.RetryConfig)."
            )
        self.max_concurrency = max_concurrency
        self.agent = agent
        self.max_tool_calls_per_turn = max_tool_calls_per_turn

    @property
    def sequential(self) -> bool:
        """True when calls run one at a time in the model's order."""
        return self.max_concurrency == 1

    @property
    def strategy(self) -> ExecutionStrategy:
        """The strategy this executor stands for."""
        return ExecutionStrategy.SEQUENTIAL if self.sequential else ExecutionStrategy.NATIVE

    async def run(
        self,
        task: str,
        *,
        deps: Any = None,
        message_history: Sequence[ModelMessage] = (),
    ) -> AgentResult[Any]:
        """Run the executor's agent on ``task`` with this executor's options; the whole `AgentResult`."""
        if self.agent is None:
            raise UserError(
                f"This {type(self).__name__} has no agent: build it as {type(self).__name__}(agent) to run tasks."
            )
        agent = self.agent._with_turns(  # a copy: the agent itself keeps its own options
            strategy=self.strategy,
            max_concurrent_tools=self.max_concurrency if not self.sequential else None,
            max_tool_calls_per_turn=self.max_tool_calls_per_turn,
        )
        return await agent.run(task, deps=deps, message_history=message_history)

    @overload
    async def execute(self, calls: Sequence[ToolCall], ctx: TurnContext, /) -> list[ToolReturnMessage]: ...

    @overload
    async def execute(self, task: str, /, *, deps: Any = None, message_history: Sequence[ModelMessage] = ()) -> Any: ...

    async def execute(
        self,
        calls: Sequence[ToolCall] | str,
        ctx: TurnContext | None = None,
        /,
        *,
        deps: Any = None,
        message_history: Sequence[ModelMessage] = (),
    ) -> Any:
        """Run a turn's ``calls`` (one tool message per call, in order), or the agent on a task.

        ``execute(task)`` (an executor built with an agent) runs the agent and returns its output,
        ``result.output`` (use `run` for the whole result).
        """
        if isinstance(calls, str):
            return (await self.run(calls, deps=deps, message_history=message_history)).output
        if ctx is None:
            raise UserError("execute(calls, ctx) needs the turn's context; to run an agent on a task, pass a string.")
        return await self._execute_calls(calls, ctx)

    async def _execute_calls(self, calls: Sequence[ToolCall], ctx: TurnContext) -> list[ToolReturnMessage]:
        """Run ``calls``; return one tool message per call, in the calls' order."""
        out: dict[int, ToolReturnMessage] = {}
        limit = ctx.max_tool_calls_per_turn
        runnable: list[tuple[int, ToolCall, dict[str, Any]]] = []
        for i, call in enumerate(calls):
            if i >= limit:
                through = [name for name in ("execute_tool_plan", "execute_plan") if name in ctx.meta_tools]
                hint = f" (or put them into one {' or '.join(through)})" if through else ""
                out[i] = _error_message(
                    call,
                    f"Not run: this turn made {len(calls)} tool calls and at most {limit} run per turn. "
                    f"Make the remaining calls in your next turn{hint}.",
                )
                continue
            try:
                args = call.parse_arguments()
            except ToolError as exc:
                out[i] = _error_message(call, exc.message)
                continue
            if call.name not in ctx.meta_tools and call.name not in ctx.registry:
                known = [*ctx.registry.names, *ctx.meta_tools]
                out[i] = _error_message(call, UnknownToolError(call.name, known).message)
                continue
            runnable.append((i, call, args))

        if self.sequential:
            group: list[tuple[int, ToolCall, dict[str, Any]]] = []
            for item in [*runnable, None]:
                if item is not None and item[1].name not in ctx.meta_tools:
                    group.append(item)
                    continue
                if group:
                    out.update(await self._run_plain(group, ctx))
                    group = []
                if item is not None:
                    out[item[0]] = await self._run_meta(item[1], item[2], ctx)
        else:
            plain = [item for item in runnable if item[1].name not in ctx.meta_tools]
            meta = [item for item in runnable if item[1].name in ctx.meta_tools]
            async with task_group() as tg:
                plain_task = tg.create_task(self._run_plain(plain, ctx))
                meta_tasks = {i: tg.create_task(self._run_meta(call, args, ctx)) for i, call, args in meta}
            out.update(plain_task.result())
            out.update({i: t.result() for i, t in meta_tasks.items()})
        return [out[i] for i in range(len(calls))]

    async def _run_plain(
        self, items: list[tuple[int, ToolCall, dict[str, Any]]], ctx: TurnContext
    ) -> dict[int, ToolReturnMessage]:
        if not items:
            return {}
        by_step = {f"call{i}": (i, call) for i, call, _ in items}
        compiled = compile_calls([(f"call{i}", call.name, args) for i, call, args in items])
        emit = ctx.emit

        def on_event(event: PlanEvent) -> None:
            if emit is None:
                return
            if isinstance(event, StepStarted) and event.attempt == 1:
                emit(ToolExecutionStarted(call=by_step[event.step_id][1]))
            elif isinstance(event, StepFinished):
                call = by_step[event.result.id][1]
                message = self._message(call, event.result)
                emit(ToolExecutionFinished(call=call, content=message.content, is_error=message.is_error))

        limits = RunLimits.of(
            ctx.limits,
            max_concurrency=min(self.max_concurrency, ctx.limits.max_concurrency),
            failure_mode="fail_forward",  # the calls of a turn are independent
        )
        run = PlanRun(
            compiled,
            ctx.invoker,
            limits=limits,
            expires=ctx.expires,
            expires_note="the agent run's deadline",
            on_event=on_event if emit else None,
            approval=None if ctx.approval is None else ApprovalGate(ctx.approval, ctx.registry, ctx.on_approval),
        )
        if ctx.traced:
            from ..tracing._internal import as_tool_call

            with as_tool_call("", call_ids={sid: call.id for sid, (_, call) in by_step.items()}):
                result = await run.run()
        else:
            result = await run.run()
        ctx.call_results.append(result)
        return {by_step[sid][0]: self._message(by_step[sid][1], r) for sid, r in result.steps.items()}

    @staticmethod
    def _message(call: ToolCall, result: StepResult) -> ToolReturnMessage:
        if result.ok:
            return ToolReturnMessage(tool_call_id=call.id, name=call.name, content=tool_content(result.output))
        if result.status == "pending_approval":  # a direct call cannot wait beyond its turn: a plan can
            return _error_message(
                call,
                f"Not run: a call of {call.name!r} needs a person's approval, and a direct call cannot wait for "
                "it. Make the call a step of an execute_tool_plan plan: the plan waits for the answer.",
            )
        message = result.error.message if result.error else result.status
        return _error_message(call, message)

    async def _run_meta(self, call: ToolCall, args: dict[str, Any], ctx: TurnContext) -> ToolReturnMessage:
        meta = ctx.meta_tools[call.name]
        if ctx.emit is not None:
            ctx.emit(ToolExecutionStarted(call=call))
        try:
            if ctx.traced:
                from ..tracing._internal import as_tool_call

                with as_tool_call(call.name, call.id):
                    content, is_error, result = await self._call_meta(meta, args, ctx)
            else:
                content, is_error, result = await self._call_meta(meta, args, ctx)
        except ToolError as exc:
            content, is_error, result = exc.message, True, None
        if result is not None:
            ctx.plan_results.append(result)
            if result.status == "pending_approval":  # the turn ends; the answers resume it (`Agent.run`)
                ctx.waiting[call.id] = (args, result)
        if is_error:
            message = _error_message(call, content)
        else:
            message = ToolReturnMessage(tool_call_id=call.id, name=call.name, content=content)
        if ctx.emit is not None:
            ctx.emit(ToolExecutionFinished(call=call, content=message.content, is_error=message.is_error))
        return message

    @staticmethod
    async def _call_meta(meta: MetaTool, args: dict[str, Any], ctx: TurnContext) -> tuple[str, bool, PlanResult | None]:
        if ctx.approval is not None and isinstance(meta, _MetaTool | CodeTool):
            return await ctx.call_meta(meta, args, approval=ctx.approval, on_approval=ctx.on_approval)
        return await ctx.call_meta(meta, args)


def _check_agent(executor: str, agent: object) -> None:
    if not callable(getattr(agent, "_with_turns", None)):
        raise UserError(f"{executor}(agent) takes a toolplan Agent, got {type(agent).__name__}.")


class NativeExecutor(ToolCallExecutor):
    """A turn's calls run concurrently, at most ``max_concurrency`` at once (default 20).

    ``NativeExecutor(agent, max_tool_calls_per_turn=50, max_concurrent_tools=20, resilience=True)``
    wraps an agent instead: ``await executor.execute(task)`` runs it with concurrent calls and returns
    its output. Options left out are the agent's own; ``resilience=True`` is what toolplan's models
    already do (they retry rate limits and transient failures, see `toolplan.models.RetryConfig`).
    """

    def __init__(
        self,
        agent: _Wrapped | int = DEFAULT_MAX_CONCURRENCY,
        /,
        max_tool_calls_per_turn: int | None = None,
        max_concurrent_tools: int | None = None,
        resilience: bool = True,
    ) -> None:
        if isinstance(agent, int):  # the executor of one agent run's turns
            if max_tool_calls_per_turn is not None or max_concurrent_tools is not None:
                raise UserError(
                    "max_tool_calls_per_turn and max_concurrent_tools need an agent: NativeExecutor(agent, ...)."
                )
            super().__init__(max_concurrency=agent, resilience=resilience)
            return
        _check_agent("NativeExecutor", agent)
        super().__init__(
            max_concurrency=agent.max_concurrent_tools if max_concurrent_tools is None else max_concurrent_tools,
            agent=agent,
            max_tool_calls_per_turn=max_tool_calls_per_turn,
            resilience=resilience,
        )


class SequentialExecutor(ToolCallExecutor):
    """A turn's calls run one at a time, in the order the model made them.

    ``SequentialExecutor(agent)`` wraps an agent: ``await executor.execute(task)`` runs it with its
    calls one at a time and returns its output.
    """

    def __init__(
        self,
        agent: _Wrapped | None = None,
        /,
        max_tool_calls_per_turn: int | None = None,
        resilience: bool = True,
    ) -> None:
        if agent is None and max_tool_calls_per_turn is not None:
            raise UserError("max_tool_calls_per_turn needs an agent: SequentialExecutor(agent, ...).")
        if agent is not None:
            _check_agent("SequentialExecutor", agent)
        super().__init__(
            max_concurrency=1, agent=agent, max_tool_calls_per_turn=max_tool_calls_per_turn, resilience=resilience
        )


@overload
def create_executor(
    strategy: ExecutionStrategy | str, *, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
) -> ToolCallExecutor: ...


@overload
@deprecated("create_executor(agent, strategy) is deprecated: pass create_executor(strategy, max_concurrency=...).")
def create_executor(agent: _HasConcurrency, strategy: ExecutionStrategy | str, /) -> ToolCallExecutor: ...


def create_executor(
    strategy: Any, legacy: ExecutionStrategy | str | None = None, *, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
) -> ToolCallExecutor:
    """The executor for ``strategy``: ``native`` runs at most ``max_concurrency`` calls at once.

    ``create_executor(agent, strategy)`` (the agent's ``max_concurrent_tools``) still works for one
    release, with a `DeprecationWarning`.
    """
    if legacy is not None:
        warnings.warn(
            "create_executor(agent, strategy) is deprecated; call "
            "create_executor(strategy, max_concurrency=agent.max_concurrent_tools) "
            "(the old form goes away in the next release).",
            DeprecationWarning,
            stacklevel=2,
        )
        strategy, max_concurrency = legacy, strategy.max_concurrent_tools
    match ExecutionStrategy(strategy):
        case ExecutionStrategy.NATIVE:
            return NativeExecutor(max_concurrency)
        case ExecutionStrategy.SEQUENTIAL:
            return SequentialExecutor()
