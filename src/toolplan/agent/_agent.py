"""The agent loop: ask the model, run its tool calls (or its plan), repeat until it answers."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import NoneType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, get_origin

from typing_extensions import TypeVar

from .._context import reset_run_deps, set_run_deps
from .._errors import OutputValidationError, UsageLimitExceeded, UserError
from .._tasks import task_group
from ..execute import Backend, BudgetWarning, RunLimits, RunStore, ToolChooser, ToolInvoker
from ..models import (
    AssistantMessage,
    Model,
    ModelMessage,
    ModelSettings,
    SystemMessage,
    UserMessage,
    infer_model,
)
from ..plan import META_TOOL_NAMES, Budget
from ..policy import STRATEGIES, StatsStore, Strategy, ToolPolicy
from ..tools import ToolDefinition, ToolRegistry, ToolsLike
from ..tracing import tracing_enabled
from ..tracing._internal import get_tracer
from ._declare import DECLARE_TOOL_NAME, DeclarePlanTool, declare_instructions
from ._events import AgentEvent, ModelRequestStarted, RunFinished
from ._executors import ExecutionStrategy, TurnContext, create_executor
from ._metatools import (
    BATCH_TOOL_NAME,
    PLAN_TOOL_NAME,
    BatchTool,
    MetaTool,
    PlanTool,
    batch_instructions,
    planning_instructions,
)
from ._output import MISSING, OUTPUT_TOOL_NAME, OutputSpec, OutputValidationFailed, final_result, type_name
from ._result import AgentResult, OutputT, RunStatus
from ._run_state import RunState, budget_warner, tell_budget_warnings, usage_limit
from ._stream import AgentStream
from ._turn import ask, run_calls

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ..sandbox import CodeRunner

__all__ = ("Agent", "AgentStream", "OnLimit", "run")

#: The type of ``agent.run(..., deps=...)``, what tools read as ``RunContext[DepsT].deps``.
DepsT = TypeVar("DepsT", default=None)
#: What a run does when it stops at a limit: raise `UsageLimitExceeded` or return the partial result.
OnLimit = Literal["raise", "return"]

# Models set by `Agent.override`, by agent, in the current context (so tasks started inside see them).
_MODEL_OVERRIDES: ContextVar[Mapping[Agent[Any, Any], Model] | None] = ContextVar(
    "toolplan_model_overrides", default=None
)


class Agent(Generic[DepsT, OutputT]):
    """An LLM agent that calls tools, natively in parallel and, opt-in, through plans.

    Args:
        model: A `Model` or a ``"provider:name"`` string (``"openai:gpt-4o-mini"``); may be positional.
        name: A name for logs and traces.
        instructions: The system prompt.
        tools: Typed functions, `@tool` objects, `Tool` implementations, or a `ToolRegistry`.
        tool_planning: Offer the model ``execute_tool_plan`` and tell it when to plan.
        batch_calls: Offer the model ``execute_plan``: up to 50 independent calls in one parallel
            batch (``{"steps": [{"tool", "args"}]}``, no references), answered by one JSON array
            ``[{"step", "tool", "status": "ok"|"error", "result"|"error"}]`` in step order.
        code_execution: A code runner (see ``toolplan.sandbox``); offers the model ``execute_code``.
        max_iterations: Most model requests in one run.
        max_tool_calls_per_turn: Calls beyond this in one model turn are not run (the model is told).
        limits: Every tool-call limit of a run in one `RunLimits`: concurrency, timeouts, the run's
            deadline, its one budget (shared by direct calls, plans, streamed plans and code, reserved
            when a call is dispatched). The three options below override its fields.
        max_concurrent_tools: Calls of one turn (or steps of one plan) running at once (default 20).
        strategy: ``"native"`` (concurrent calls) or ``"sequential"`` (one at a time, in order).
        stream_plans: Stream the model's answer and start a plan's steps while it is still being
            written (needs `tool_planning`).
        settings: Model settings for every request.
        budget: Limits on tool calls, cost and latency over the whole run (plans and code included);
            ``max_latency`` is the run's deadline for tool calls, counted from the start of the run.
        tool_timeout: Default timeout of one tool call, in seconds.
        deps_type: The type of the dependencies a run is given (``run(..., deps=...)``) and tools
            read as ``ctx.deps`` (first parameter ``ctx: RunContext[Deps]``). Types the agent
            (``Agent[Deps, ...]``) and is checked with ``isinstance`` at the start of a run.
        output_type: The type of ``result.output``: ``str`` (the default: the model's text), or a
            pydantic model, dataclass, TypedDict, ``list[int]``...: the model is offered a
            ``final_result`` tool with its schema and the answer is validated.
        output_retries: How many times an answer that does not validate goes back to the model
            with the problems before the run raises `OutputValidationError`.
        on_limit: ``"raise"`` (default): a run that stops at ``max_iterations``, or because the
            model asks for tools after the deadline or budget ran out, raises `UsageLimitExceeded`
            carrying the partial result. ``"return"`` (``output_type=str`` only) keeps the earlier
            behaviour: calls past the deadline or budget are refused and the model is told, and a
            run reaching ``max_iterations`` returns its result with ``status="max_iterations"``.
        store: A store (`toolplan.store.open_store`): each plan the model runs (``execute_tool_plan``,
            ``execute_plan``) is a durable run in it, linked to the agent run by its ``parent_id``
            (``agent_...``); ``result.plan_results[i].run_id`` names each stored run. A policy
            given by name keeps its statistics there too.
        policy: Chooses among alternative tools (groups, ``{"one_of": [...]}`` steps) in every call
            the run makes, and learns across runs: a `toolplan.policy.ToolPolicy`, or a strategy
            name (``"thompson"``, ``"ucb1"``, ``"epsilon_greedy"``, ``"greedy"``) for a ToolPolicy
            that keeps its statistics in ``store``. None: a group's general tool, else its first.
        declare_plan: Offer the model ``declare_plan`` and ask it to declare its calls before
            making them; ``result.declarations`` holds what it declared and ``result.audit()``
            compares the last declaration with what ran.
        backend: Where tool calls run (``toolplan.backends.RayBackend()``, say); None: in this process.
            Limits, budgets, retries and the run's records stay in this process either way. A
            `RayBackend` also runs ``code_execution``'s sandbox on a worker (``code_on_workers``).
        tracing: Trace this agent's runs with OpenTelemetry (True), never (False), or as the
            process is set up (None: `toolplan.tracing.configure_tracing`, or a tracer provider
            being set). See docs/observability.md.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        name: str = "agent",
        instructions: str = "",
        tools: ToolsLike = (),
        tool_planning: bool = False,
        batch_calls: bool = False,
        code_execution: CodeRunner | None = None,
        max_iterations: int = 25,
        max_tool_calls_per_turn: int = 50,
        limits: RunLimits | None = None,
        max_concurrent_tools: int | None = None,
        strategy: ExecutionStrategy | str = ExecutionStrategy.NATIVE,
        stream_plans: bool = False,
        settings: ModelSettings | None = None,
        budget: Budget | None = None,
        tool_timeout: float | None = None,
        deps_type: type[DepsT] = NoneType,  # type: ignore[assignment]  # the TypeVar's default
        output_type: type[OutputT] = str,  # type: ignore[assignment]  # the TypeVar's default
        output_retries: int = 1,
        on_limit: OnLimit = "raise",
        store: RunStore | None = None,
        policy: ToolChooser | Strategy | None = None,
        declare_plan: bool = False,
        backend: Backend | None = None,
        tracing: bool | None = None,
    ) -> None:
        if max_iterations < 1:
            raise UserError(f"max_iterations must be >= 1, got {max_iterations}.")
        if isinstance(max_tool_calls_per_turn, bool) or max_tool_calls_per_turn < 1:
            raise UserError(f"max_tool_calls_per_turn must be >= 1, got {max_tool_calls_per_turn!r}.")
        self.limits = RunLimits.of(
            limits, max_concurrency=max_concurrent_tools, budget=budget, step_timeout=tool_timeout
        )
        self.model = infer_model(model)
        self.name = name
        self.instructions = instructions
        registry = ToolRegistry.of(tools)
        clash = [n for n in registry.names if n in META_TOOL_NAMES]
        if clash:
            raise UserError(f"Tool name {clash[0]!r} is reserved for toolplan's meta-tools; rename your tool.")
        self.registry = registry
        self.tool_planning = tool_planning
        self.batch_calls = batch_calls
        self.code_execution = code_execution
        self.max_iterations = max_iterations
        self.max_tool_calls_per_turn = max_tool_calls_per_turn
        self.strategy = ExecutionStrategy(strategy)
        self.stream_plans = stream_plans
        self.settings = ModelSettings.coerce(settings)
        if isinstance(output_retries, bool) or not isinstance(output_retries, int) or output_retries < 0:
            raise UserError(f"output_retries must be a whole number >= 0, got {output_retries!r}.")
        if on_limit not in ("raise", "return"):
            raise UserError(f"on_limit must be 'raise' or 'return', got {on_limit!r}.")
        if not _is_type(deps_type):
            raise UserError(f"deps_type must be a type (the class of your dependencies), got {deps_type!r}.")
        self.deps_type = deps_type
        self.output_type = output_type
        self.output_retries = output_retries
        self.on_limit: OnLimit = on_limit
        self.store = store
        self.policy = self._policy(policy, store)
        self.declare_plan = declare_plan
        self.backend = backend
        self.tracing = tracing
        self._output: OutputSpec[OutputT] | None = None if output_type is str else OutputSpec(output_type)
        if self._output is not None:
            if OUTPUT_TOOL_NAME in registry:
                raise UserError(
                    f"Tool name {OUTPUT_TOOL_NAME!r} is reserved for the final answer when output_type is set; "
                    "rename your tool."
                )
            if on_limit == "return":
                raise UserError(
                    "on_limit='return' needs output_type=str: a run that stops early has no valid structured "
                    "output to return. Keep on_limit='raise' and read the partial result from "
                    "UsageLimitExceeded.result."
                )

    @staticmethod
    def _policy(policy: ToolChooser | str | None, store: RunStore | None) -> ToolChooser | None:
        if policy is None or isinstance(policy, ToolChooser):
            return policy
        if isinstance(policy, str) and policy in STRATEGIES:
            return ToolPolicy(policy, store=store if isinstance(store, StatsStore) else None)
        raise UserError(
            f"policy must be a toolplan.policy.ToolPolicy or a strategy name ({', '.join(STRATEGIES)}), got {policy!r}."
        )

    @property
    def max_concurrent_tools(self) -> int:
        """Calls of one turn (or steps of one plan) running at once (``limits.max_concurrency``)."""
        return self.limits.max_concurrency

    @property
    def budget(self) -> Budget:
        """The run's budget (``limits.budget``)."""
        return self.limits.budget

    @property
    def tool_timeout(self) -> float | None:
        """Default timeout of one tool call (``limits.step_timeout``)."""
        return self.limits.step_timeout

    def _inner_limits(self) -> RunLimits:
        """Limits of one plan or code run inside an agent run.

        The run's budget and deadline are enforced by the run's invoker and deadline, not again per plan.
        """
        return dataclasses.replace(self.limits, budget=Budget(), deadline=None, window=None)

    @property
    def model(self) -> Model:
        """The model the agent asks (inside `override`, the model given there)."""
        overrides = _MODEL_OVERRIDES.get()
        if overrides:
            override = overrides.get(self)
            if override is not None:
                return override
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        self._model = model

    @contextmanager
    def override(self, *, model: Model | str | None = None) -> Iterator[None]:
        """Use another model inside a ``with`` block: a test model in a test, say.

        Every run started inside the block (``run``, ``run_sync``, ``run_stream``) asks ``model``;
        the agent's own model is back when the block ends, even on an exception. Overrides nest
        (the innermost wins) and stay within the current context: a concurrent task that did not
        start inside the block keeps the agent's model. ``model=None`` changes nothing.

        ```python
        with agent.override(model=TestModel()):
            result = agent.run_sync("...")
        ```
        """
        if model is None:
            yield
            return
        token = _MODEL_OVERRIDES.set({**(_MODEL_OVERRIDES.get() or {}), self: infer_model(model)})
        try:
            yield
        finally:
            _MODEL_OVERRIDES.reset(token)

    def enable_tool_planning(self, *, stream_plans: bool | None = None) -> Self:
        """Offer the model ``execute_tool_plan`` (fluent: returns the agent)."""
        self.tool_planning = True
        if stream_plans is not None:
            self.stream_plans = stream_plans
        return self

    # -- what the model sees ----------------------------------------------------------------------

    def meta_tools(self) -> dict[str, MetaTool]:
        """The meta-tools this agent offers, by name."""
        out: dict[str, MetaTool] = {}
        if self.tool_planning:
            out[PLAN_TOOL_NAME] = PlanTool(self.registry, limits=self._inner_limits())
        if self.batch_calls:
            out[BATCH_TOOL_NAME] = BatchTool(self.registry, limits=self._inner_limits())
        if self.code_execution is not None:
            from ._code import CodeTool, runner_for

            runner = runner_for(self.code_execution, self.backend)
            code_tool = CodeTool(runner, self.registry, run_limits=self._inner_limits())
            out[code_tool.name] = code_tool
        if self.declare_plan:
            out[DECLARE_TOOL_NAME] = DeclarePlanTool([d.name for d in self.registry.definitions()])
        return out

    def system_prompt(self) -> str:
        """The system prompt: the instructions plus the sections for planning and code."""
        parts = [self.instructions.strip()] if self.instructions.strip() else []
        if self.declare_plan:
            parts.append(declare_instructions())
        if self.tool_planning:
            parts.append(planning_instructions(self.registry.names))
        if self.batch_calls:
            parts.append(batch_instructions())
        if self.code_execution is not None:
            from ._code import code_instructions

            parts.append(code_instructions(self.code_execution))
        if self._output is not None:
            parts.append(self._output.instructions())
        return "\n\n".join(parts)

    def tool_definitions(self, meta: dict[str, MetaTool] | None = None) -> list[ToolDefinition]:
        """The tools offered to the model: the agent's tools, the meta-tools, then ``final_result``."""
        meta = self.meta_tools() if meta is None else meta
        out = [*self.registry.definitions(), *(d for m in meta.values() for d in m.definitions())]
        if self._output is not None:
            out.append(self._output.definition)
        return out

    def _with_turns(
        self,
        *,
        strategy: ExecutionStrategy,
        max_concurrent_tools: int | None,
        max_tool_calls_per_turn: int | None,
    ) -> Agent[DepsT, OutputT]:
        """A copy of this agent (its model as of now) whose turns run as an executor says."""
        if max_tool_calls_per_turn is not None and (
            isinstance(max_tool_calls_per_turn, bool) or max_tool_calls_per_turn < 1
        ):
            raise UserError(f"max_tool_calls_per_turn must be >= 1, got {max_tool_calls_per_turn!r}.")
        agent = copy.copy(self)
        agent.model = self.model  # an `override` in force applies to the copy too
        agent.strategy = strategy
        if max_tool_calls_per_turn is not None:
            agent.max_tool_calls_per_turn = max_tool_calls_per_turn
        if max_concurrent_tools is not None:
            agent.limits = RunLimits.of(self.limits, max_concurrency=max_concurrent_tools)
        return agent

    # -- running ------------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        *,
        message_history: Sequence[ModelMessage] = (),
        deps: DepsT = None,  # type: ignore[assignment]  # None is DepsT's default
    ) -> AgentResult[OutputT]:
        """Run the agent on ``prompt`` until the model answers.

        ``deps`` is what the run's tools get as ``ctx.deps`` (see `RunContext`). Raises
        `UsageLimitExceeded` when the run stops at a limit first (unless ``on_limit="return"``).
        """
        self._check_deps(deps)
        return await self._run(prompt, message_history, None, deps)

    async def arun(
        self,
        prompt: str,
        *,
        message_history: Sequence[ModelMessage] = (),
        deps: DepsT = None,  # type: ignore[assignment]  # None is DepsT's default
    ) -> AgentResult[OutputT]:
        """Another name for `run` (the asynchronous run), for code written for frameworks that say ``arun``."""
        return await self.run(prompt, message_history=message_history, deps=deps)

    def run_sync(
        self,
        prompt: str,
        *,
        message_history: Sequence[ModelMessage] = (),
        deps: DepsT = None,  # type: ignore[assignment]  # None is DepsT's default
    ) -> AgentResult[OutputT]:
        """`run` for synchronous code (it starts its own event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._check_deps(deps)
            return asyncio.run(self._run_and_close(prompt, message_history, deps))
        raise UserError("Agent.run_sync() cannot run inside an event loop; use `await agent.run(...)`.")

    async def _run_and_close(self, prompt: str, history: Sequence[ModelMessage], deps: DepsT) -> AgentResult[OutputT]:
        # run_sync's event loop ends with this call: release the model's connections bound to it.
        try:
            return await self._run(prompt, history, None, deps)
        finally:
            await self.model.aclose()

    def _check_deps(self, deps: object) -> None:
        if self.deps_type is NoneType:
            return
        try:
            ok = isinstance(deps, self.deps_type)
        except TypeError:  # a generic alias or another type isinstance cannot check
            return
        if not ok:
            name = getattr(self.deps_type, "__qualname__", repr(self.deps_type))
            given = "no deps" if deps is None else f"deps of type {type(deps).__qualname__}"
            raise UserError(
                f"This agent has deps_type={name}, but the run was given {given}. "
                f"Pass agent.run(..., deps={name}(...))."
            )

    def run_stream(
        self,
        prompt: str,
        *,
        message_history: Sequence[ModelMessage] = (),
        deps: DepsT = None,  # type: ignore[assignment]  # None is DepsT's default
    ) -> AgentStream[DepsT, OutputT]:
        """Run in the background of an ``async with`` block and iterate over the run's events.

        ```python
        async with agent.run_stream("...") as stream:
            async for event in stream:
                ...
        print(stream.result.output)
        ```
        """
        self._check_deps(deps)
        return AgentStream(lambda emit: self._run(prompt, message_history, emit, deps))

    async def _run(
        self,
        prompt: str,
        history: Sequence[ModelMessage],
        emit: Callable[[AgentEvent], None] | None,
        deps: DepsT,
    ) -> AgentResult[OutputT]:
        # The run's dependencies, for the length of the run: every task and tool thread it starts
        # copies the context, so direct calls, plans, streamed plans and code mode all see them.
        token = set_run_deps(deps)
        try:
            if self.tracing is None:
                return await self._traced_loop(prompt, history, emit)
            with tracing_enabled(self.tracing):  # for the run's plans too
                return await self._traced_loop(prompt, history, emit)
        finally:
            reset_run_deps(token)

    async def _traced_loop(
        self, prompt: str, history: Sequence[ModelMessage], emit: Callable[[AgentEvent], None] | None
    ) -> AgentResult[OutputT]:
        tracer = get_tracer()
        if tracer is None:
            return await self._loop(prompt, history, emit, None)
        from ..tracing._internal import agent_span, record_run

        with agent_span(tracer, self.name, self.model.name) as span:
            result = await self._loop(prompt, history, emit, tracer)
            record_run(span, result.usage.input_tokens, result.usage.output_tokens, result.status)
            return result

    async def _loop(
        self,
        prompt: str,
        history: Sequence[ModelMessage],
        emit: Callable[[AgentEvent], None] | None,
        tracer: Tracer | None,
    ) -> AgentResult[OutputT]:
        meta = self.meta_tools()
        definitions = self.tool_definitions(meta)
        messages: list[ModelMessage] = []
        system = self.system_prompt()
        if system and not any(isinstance(m, SystemMessage) for m in history):
            messages.append(SystemMessage(content=system))
        messages.extend(history)
        new_from = len(messages) if history else 0  # this run's own messages (`AgentResult.new_messages`)
        messages.append(UserMessage(content=prompt))
        deadline = self.limits.run_deadline
        ctx = TurnContext(
            registry=self.registry,
            meta_tools=meta,
            # the run's one ledger
            invoker=ToolInvoker.for_limits(self.registry, self.limits, backend=self.backend, chooser=self.policy),
            max_tool_calls_per_turn=self.max_tool_calls_per_turn,
            limits=self._inner_limits(),
            expires=None if deadline is None else time.monotonic() + deadline,
            emit=emit,
            store=self.store,
            run_id=f"agent_{int(time.time())}_{os.urandom(8).hex()}",
            traced=tracer is not None,
        )
        if tracer is not None:
            from ..tracing._internal import set_run_id

            set_run_id(ctx.run_id)
        warnings: list[BudgetWarning] = []  # reached during a turn, told to the model after it
        if self.limits.budget.warn_at is not None:
            ctx.invoker.meter.on_warning = budget_warner(ctx.run_id, emit, warnings)
        executor = create_executor(self.strategy, max_concurrency=self.max_concurrent_tools)
        output = self._output
        run = RunState(messages=messages, ctx=ctx, model_name=self.model.name, new_from=new_from)
        result: AgentResult[OutputT] | None = None
        for iteration in range(1, self.max_iterations + 1):
            if emit is not None:
                emit(ModelRequestStarted(iteration=iteration))
            async with task_group() as tg:
                asking = functools.partial(
                    ask,
                    self.model,
                    self.settings,
                    messages,
                    definitions,
                    ctx,
                    tg,
                    stream_plans=self.stream_plans,
                    tool_planning=self.tool_planning,
                )
                if tracer is None:
                    response, streamed = await asking()
                else:
                    from ..tracing._internal import chat_span, record_response

                    with chat_span(tracer, self.model.name) as chat:
                        response, streamed = await asking()
                        record_response(chat, response)
                run.usage = run.usage + response.usage
                run.model_name = response.model_name or run.model_name
                messages.append(response.message)
                tool_calls = response.message.tool_calls
                if not tool_calls:
                    text = response.message.content or ""
                    if output is None:
                        result = run.result(text, "completed")  # OutputT is str
                        break
                    try:
                        result = run.result(output.from_text(text), "completed")
                        break
                    except OutputValidationFailed as exc:
                        self._retry_output(run, exc)
                        messages.append(UserMessage(content=exc.message))
                        continue
                final = [c for c in tool_calls if c.name == OUTPUT_TOOL_NAME] if output is not None else []
                rest = [c for c in tool_calls if c.name != OUTPUT_TOOL_NAME] if final else list(tool_calls)
                if rest and self.on_limit == "raise":  # "return": refused calls are reported, as before
                    limit = usage_limit(ctx, self.limits.run_deadline)
                    if limit is not None:
                        for plan in streamed.values():
                            plan.abort("Cancelled: the agent run's limits were reached.")
                        result = self._stopped(run, "usage_limit", *limit)
                        break
                run.calls += len(rest)  # the final answer is not a tool call
                done = await run_calls(executor, rest, streamed, ctx) if rest else []
                replies = {m.tool_call_id: m for m in done}
                value: Any = MISSING
                if final:
                    assert output is not None
                    value, final_replies, failure = final_result(output, final)
                    replies.update(final_replies)
                messages.extend(replies[c.id] for c in tool_calls if c.id in replies)
                if warnings:
                    tell_budget_warnings(messages, warnings)
                if value is not MISSING:
                    result = run.result(value, "completed")
                    break
                if final:
                    self._retry_output(run, failure)
        else:
            result = self._stopped(
                run,
                "max_iterations",
                "max_iterations",
                f"The run stopped after max_iterations={self.max_iterations} model requests without a final "
                "answer. Raise max_iterations, or give the agent tool planning so it needs fewer round-trips.",
            )
        assert result is not None
        if emit is not None:
            emit(RunFinished(result=result))
        return result

    def _stopped(self, run: RunState, status: RunStatus, limit: str, message: str) -> AgentResult[OutputT]:
        """The partial result of a run stopped at ``limit``; raised in `UsageLimitExceeded` unless on_limit='return'."""
        last_text = next(
            (m.content for m in reversed(run.messages) if isinstance(m, AssistantMessage) and m.content), ""
        )
        output: Any = last_text if self._output is None else None
        partial: AgentResult[OutputT] = run.result(output, status, error=message)
        if self.on_limit == "return":
            return partial
        error = UsageLimitExceeded(message, limit=limit)
        error.result = partial
        raise error

    def _retry_output(self, run: RunState, failure: OutputValidationFailed | None) -> None:
        """Count one answer that did not validate; raise once ``output_retries`` are used up."""
        run.output_failures += 1
        if run.output_failures > self.output_retries:
            detail = failure.message if failure is not None else ""
            error = OutputValidationError(
                f"The model's final answer did not validate as {type_name(self.output_type)} after "
                f"{self.output_retries} retr{'y' if self.output_retries == 1 else 'ies'}. Last problem: {detail} "
                "Raise output_retries, simplify output_type, or describe the expected answer in the instructions."
            )
            error.result = run.result(None, "output_invalid", error=error.message)
            raise error


def _is_type(value: object) -> bool:
    """A class, or a generic alias of one (``list[int]``)."""
    return isinstance(value, type) or get_origin(value) is not None


async def run(
    task: str,
    *,
    tools: ToolsLike = (),
    model: Model | str,
    max_iterations: int = 25,
    tool_planning: bool = False,
    instructions: str = "",
) -> AgentResult:
    """Run a one-off agent on ``task`` and return its result.

    Raises `toolplan.UsageLimitExceeded` (with the partial result) when the run stops at
    ``max_iterations`` or at its budget before the model answers; build an `Agent` for more options.
    """
    agent = Agent(
        model, tools=tools, max_iterations=max_iterations, tool_planning=tool_planning, instructions=instructions
    )
    return await agent.run(task)
