"""The agent loop: ask the model, run its tool calls (or its plan), repeat until it answers."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Self

from .._errors import UserError
from .._tasks import task_group
from ..execute import RunLimits, ToolInvoker
from ..models import (
    AssistantMessage,
    Model,
    ModelMessage,
    ModelResponse,
    ModelSettings,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallArgsDelta,
    ToolCallStarted,
    ToolReturnMessage,
    Usage,
    UserMessage,
    infer_model,
)
from ..plan import META_TOOL_NAMES, Budget
from ..tools import ToolDefinition, ToolRegistry, ToolsLike
from ._events import AgentEvent, ModelRequestStarted, PlanStreamStarted, RunFinished
from ._executors import ExecutionStrategy, ToolCallExecutor, TurnContext, create_executor
from ._metatools import PLAN_TOOL_NAME, MetaTool, PlanTool, planning_instructions
from ._result import AgentResult
from ._streaming import StreamedPlan

if TYPE_CHECKING:
    from ..sandbox import CodeRunner

__all__ = ("Agent", "AgentStream", "run")

# Models set by `Agent.override`, by agent, in the current context (so tasks started inside see them).
_MODEL_OVERRIDES: ContextVar[Mapping[Agent, Model] | None] = ContextVar("toolplan_model_overrides", default=None)


class Agent:
    """An LLM agent that calls tools, natively in parallel and, opt-in, through plans.

    Args:
        model: A `Model` or a ``"provider:name"`` string (``"openai:gpt-4o-mini"``); may be positional.
        name: A name for logs and traces.
        instructions: The system prompt.
        tools: Typed functions, `@tool` objects, `Tool` implementations, or a `ToolRegistry`.
        tool_planning: Offer the model ``execute_tool_plan`` and tell it when to plan.
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
    """

    def __init__(
        self,
        model: Model | str,
        *,
        name: str = "agent",
        instructions: str = "",
        tools: ToolsLike = (),
        tool_planning: bool = False,
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
        self.code_execution = code_execution
        self.max_iterations = max_iterations
        self.max_tool_calls_per_turn = max_tool_calls_per_turn
        self.strategy = ExecutionStrategy(strategy)
        self.stream_plans = stream_plans
        self.settings = ModelSettings.coerce(settings)

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
        return dataclasses.replace(self.limits, budget=Budget(), deadline=None)

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
        if self.code_execution is not None:
            from ._code import CodeTool

            code_tool = CodeTool(self.code_execution, self.registry, run_limits=self._inner_limits())
            out[code_tool.name] = code_tool
        return out

    def system_prompt(self) -> str:
        """The system prompt: the instructions plus the sections for planning and code."""
        parts = [self.instructions.strip()] if self.instructions.strip() else []
        if self.tool_planning:
            parts.append(planning_instructions(self.registry.names))
        if self.code_execution is not None:
            from ._code import code_instructions

            parts.append(code_instructions(self.code_execution))
        return "\n\n".join(parts)

    def tool_definitions(self, meta: dict[str, MetaTool] | None = None) -> list[ToolDefinition]:
        """The tools offered to the model: the agent's tools, then the meta-tools."""
        meta = self.meta_tools() if meta is None else meta
        return [*self.registry.definitions(), *(d for m in meta.values() for d in m.definitions())]

    # -- running ------------------------------------------------------------------------------------

    async def run(self, prompt: str, *, message_history: Sequence[ModelMessage] = ()) -> AgentResult:
        """Run the agent on ``prompt`` until the model answers (or ``max_iterations`` is reached)."""
        return await self._run(prompt, message_history, None)

    def run_sync(self, prompt: str, *, message_history: Sequence[ModelMessage] = ()) -> AgentResult:
        """`run` for synchronous code (it starts its own event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_and_close(prompt, message_history))
        raise UserError("Agent.run_sync() cannot run inside an event loop; use `await agent.run(...)`.")

    async def _run_and_close(self, prompt: str, history: Sequence[ModelMessage]) -> AgentResult:
        # run_sync's event loop ends with this call: release the model's connections bound to it.
        try:
            return await self._run(prompt, history, None)
        finally:
            await self.model.aclose()

    def run_stream(self, prompt: str, *, message_history: Sequence[ModelMessage] = ()) -> AgentStream:
        """Run in the background of an ``async with`` block and iterate over the run's events.

        ```python
        async with agent.run_stream("...") as stream:
            async for event in stream:
                ...
        print(stream.result.output)
        ```
        """
        return AgentStream(self, prompt, message_history)

    async def _run(
        self, prompt: str, history: Sequence[ModelMessage], emit: Callable[[AgentEvent], None] | None
    ) -> AgentResult:
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
            invoker=ToolInvoker.for_limits(self.registry, self.limits),  # the run's one budget ledger
            max_tool_calls_per_turn=self.max_tool_calls_per_turn,
            limits=self._inner_limits(),
            expires=None if deadline is None else time.monotonic() + deadline,
            emit=emit,
        )
        executor = create_executor(self, self.strategy)
        usage = Usage()
        calls = 0
        model_name = self.model.name
        for iteration in range(1, self.max_iterations + 1):
            if emit is not None:
                emit(ModelRequestStarted(iteration=iteration))
            async with task_group() as tg:
                response, streamed = await self._ask(messages, definitions, ctx, tg)
                usage = usage + response.usage
                model_name = response.model_name or model_name
                messages.append(response.message)
                tool_calls = response.message.tool_calls
                if not tool_calls:
                    result = AgentResult(
                        output=response.message.content or "",
                        status="completed",
                        messages=tuple(messages),
                        usage=usage,
                        plan_results=tuple(ctx.plan_results),
                        tool_calls=calls,
                        model_name=model_name,
                        new_message_index=new_from,
                    )
                    break
                calls += len(tool_calls)
                replies = await self._execute(executor, tool_calls, streamed, ctx)
                messages.extend(replies)
        else:
            last_text = next(
                (m.content for m in reversed(messages) if isinstance(m, AssistantMessage) and m.content), ""
            )
            result = AgentResult(
                output=last_text or "",
                status="max_iterations",
                messages=tuple(messages),
                usage=usage,
                plan_results=tuple(ctx.plan_results),
                tool_calls=calls,
                model_name=model_name,
                new_message_index=new_from,
                error=f"The run stopped after max_iterations={self.max_iterations} model requests without a final "
                "answer. Raise max_iterations, or give the agent tool planning so it needs fewer round-trips.",
            )
        if emit is not None:
            emit(RunFinished(result=result))
        return result

    async def _execute(
        self,
        executor: ToolCallExecutor,
        tool_calls: Sequence[ToolCall],
        streamed: dict[str, StreamedPlan],
        ctx: TurnContext,
    ) -> list[ToolReturnMessage]:
        if not streamed:
            return await executor.execute(tool_calls, ctx)
        rest = [c for c in tool_calls if c.id not in streamed]
        rest_replies = iter(await executor.execute(rest, ctx))
        replies: list[ToolReturnMessage] = []
        for call in tool_calls:
            replies.append(await streamed[call.id].reply(call) if call.id in streamed else next(rest_replies))
        return replies

    async def _ask(
        self,
        messages: list[ModelMessage],
        definitions: list[ToolDefinition],
        ctx: TurnContext,
        tg: asyncio.TaskGroup,
    ) -> tuple[ModelResponse, dict[str, StreamedPlan]]:
        streaming = ctx.emit is not None or (self.stream_plans and self.tool_planning)
        if not streaming:
            return await self.model.request(messages, definitions, self.settings), {}
        plans: dict[int, StreamedPlan] = {}
        response: ModelResponse | None = None
        plan_tool = ctx.meta_tools.get(PLAN_TOOL_NAME)
        stream = self.model.stream(messages, definitions, self.settings)
        try:
            async for event in stream:
                if isinstance(event, ResponseCompleted):
                    response = event.response
                elif isinstance(event, TextDelta):
                    if ctx.emit is not None:
                        ctx.emit(event)
                elif isinstance(event, ToolCallStarted):
                    if self.stream_plans and event.name == PLAN_TOOL_NAME and isinstance(plan_tool, PlanTool):
                        plans[event.index] = StreamedPlan.start(plan_tool, ctx, tg)
                        if ctx.emit is not None:
                            ctx.emit(PlanStreamStarted(call_id=event.id))
                elif isinstance(event, ToolCallArgsDelta) and event.index in plans:
                    plans[event.index].feed(event.delta)
        except BaseException:
            for plan in plans.values():  # the answer broke off: stop what its plans started
                plan.abort("Cancelled: the model's answer broke off.")
            raise
        finally:
            await stream.aclose()
        if response is None:
            from .._errors import UnexpectedModelBehavior

            raise UnexpectedModelBehavior(f"The stream of model {self.model.name!r} ended without a response.")
        by_id: dict[str, StreamedPlan] = {}
        calls = response.message.tool_calls
        for index, plan in plans.items():
            if index < len(calls) and calls[index].name == PLAN_TOOL_NAME:
                by_id[calls[index].id] = plan
            else:  # the final response does not contain the streamed call: stop what it started
                plan.abort("Cancelled: the model's final answer did not contain this plan.")
        return response, by_id


class AgentStream:
    """The events of a running agent; ``result`` is set when the run ends. Use with ``async with``."""

    def __init__(self, agent: Agent, prompt: str, history: Sequence[ModelMessage]) -> None:
        self._agent = agent
        self._prompt = prompt
        self._history = history
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self.result: AgentResult | None = None
        self._cm: Any = None

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Self]:
        def emit(event: AgentEvent) -> None:
            if isinstance(event, RunFinished):
                self.result = event.result
            self._queue.put_nowait(event)

        async with task_group() as tg:
            task = tg.create_task(self._agent._run(self._prompt, self._history, emit))
            task.add_done_callback(lambda _t: self._queue.put_nowait(None))
            try:
                yield self
            finally:
                if not task.done():
                    task.cancel()

    async def __aenter__(self) -> Self:
        self._cm = self._session()
        return await self._cm.__aenter__()  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._cm.__aexit__(*exc)  # type: ignore[no-any-return]

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[AgentEvent]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event


async def run(
    task: str,
    *,
    tools: ToolsLike = (),
    model: Model | str,
    max_iterations: int = 25,
    tool_planning: bool = False,
    instructions: str = "",
) -> AgentResult:
    """Run a one-off agent on ``task`` and return its result."""
    agent = Agent(
        model, tools=tools, max_iterations=max_iterations, tool_planning=tool_planning, instructions=instructions
    )
    return await agent.run(task)
