"""The agent loop: ask the model, run its tool calls (or its plan), repeat until it answers."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from types import NoneType
from typing import TYPE_CHECKING, Any

from .._context import reset_run_deps, set_run_deps
from .._errors import OutputValidationError, UsageLimitExceeded, UserError
from .._tasks import task_group
from ..execute import Approval, BudgetWarning, ToolInvoker
from ..models import AssistantMessage, Model, ModelMessage, SystemMessage, ToolReturnMessage, UserMessage
from ..models._internal import SpendMeter
from ..tools import ToolsLike
from ..tools._internal import LoadedTools, loaded_tools, loading, reset_loading
from ..tracing import tracing_enabled
from ..tracing._internal import get_tracer
from ._approvals import Resume, resume_turn, waiting_result
from ._events import AgentEvent, ModelRequestStarted, RunFinished
from ._executors import TurnContext, create_executor
from ._options import DepsT, _AgentOptions
from ._output import MISSING, OUTPUT_TOOL_NAME, OutputValidationFailed, final_result, type_name
from ._result import AgentResult, OutputT, RunStatus
from ._run_state import RunState, budget_warner, tell_budget_warnings, usage_limit
from ._stream import AgentStream
from ._turn import ask, run_calls

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


__all__ = ("Agent", "AgentStream", "run")


class Agent(_AgentOptions[DepsT, OutputT]):
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
            when a call is dispatched). The three options after ``spend`` override its fields.
        spend: Caps on the run's model spend (`toolplan.SpendLimits`: input, output and total tokens,
            money at a price table), checked before each model request and after each response; a
            run at a cap ends with `UsageLimitExceeded` (see ``on_limit``). With prices,
            ``result.money`` is what the run spent. None: no caps, no money reported.
        max_concurrent_tools: Calls of one turn (or steps of one plan) running at once (default 20).
        strategy: ``"native"`` (concurrent calls) or ``"sequential"`` (one at a time, in order).
        stream_plans: Stream the model's answer and start a plan's steps while it is still being
            written (needs `tool_planning`).
        settings: Model settings for every request.
        budget: Limits on tool calls, cost and latency over the whole run (plans and code included);
            ``max_latency`` is the run's deadline for tool calls, counted from the start of the run.
        tool_timeout: Default timeout of one tool call, in seconds.
        cache: A `ResultCache`: results of ``read_only`` tools kept across the agent's runs for a
            time to live (``limits.cache``). Without one, only identical calls within one plan, one
            turn's direct calls or one code run are made once (``limits.share_calls``).
        deps_type: The type of the dependencies a run is given (``run(..., deps=...)``) and tools
            read as ``ctx.deps`` (first parameter ``ctx: RunContext[Deps]``). Types the agent
            (``Agent[Deps, ...]``) and is checked with ``isinstance`` at the start of a run.
        output_type: The type of ``result.output``: ``str`` (the default: the model's text), or a
            pydantic model, dataclass, TypedDict, ``list[int]``...: the model is offered a
            ``final_result`` tool with its schema and the answer is validated.
        output_retries: How many times an answer that does not validate goes back to the model
            with the problems before the run raises `OutputValidationError`.
        on_limit: ``"raise"`` (default): a run that stops at ``max_iterations``, at a ``spend``
            cap, or because the model asks for tools after the deadline or budget ran out, raises
            `UsageLimitExceeded` carrying the partial result. ``"return"`` (``output_type=str``
            only) keeps the earlier behaviour: calls past the deadline or budget are refused and the
            model is told, a run reaching ``max_iterations`` returns its result with
            ``status="max_iterations"``, and one at a spend cap with ``status="usage_limit"``.
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
        tool_search: How ``search_tools`` finds deferred tools (tools added with ``deferred=True``,
            or a toolset made with ``deferred=True``): a `ToolSearch` (default: words alone, five
            results). The model sees ``search_tools`` instead of the deferred tools; each tool it
            finds or names is added at the end of its tool list for the rest of the run.
            See docs/tool-search.md.
    """

    # -- running ------------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str | None = None,
        *,
        message_history: Sequence[ModelMessage] = (),
        deps: DepsT = None,  # type: ignore[assignment]  # None is DepsT's default
        resume: AgentResult[OutputT] | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> AgentResult[OutputT]:
        """Run the agent on ``prompt`` until the model answers.

        ``deps`` is what the run's tools get as ``ctx.deps`` (see `RunContext`). Raises
        `UsageLimitExceeded` when the run stops at a limit first (unless ``on_limit="return"``).

        With ``Agent(approval=...)`` and no ``on_approval``, a plan whose steps need a person's answer
        ends the model's turn: the result has status ``"pending_approval"`` and the request in
        ``result.approval``. ``agent.run(resume=result, approvals={step_id: Approval(...)})`` (no
        prompt) goes on: the plan runs its answered steps (nothing that ran runs again) and the
        model reads the outcome, rejections and their reasons included.
        """
        self._check_deps(deps)
        if resume is None:
            if prompt is None:
                raise UserError("Agent.run() needs a prompt (or resume= a result that waits for approval).")
            if approvals is not None:
                raise UserError("approvals= answers a run that waits: pass that result as resume= too.")
            return await self._run(prompt, message_history, None, deps)
        if prompt is not None or message_history:
            raise UserError("resume= goes on with the waiting run's own conversation: pass no prompt or history.")
        if resume.status != "pending_approval" or resume.waiting is None:
            raise UserError(f"resume= takes a result that waits for approval, got status {resume.status!r}.")
        return await self._run("", (), None, deps, (resume, approvals or {}))

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
        resume: Resume | None = None,
    ) -> AgentResult[OutputT]:
        # The run's dependencies, for the length of the run: every task and tool thread it starts
        # copies the context, so direct calls, plans, streamed plans and code mode all see them.
        token = set_run_deps(deps)
        # Deferred tools the run loads (found by search_tools, or named in a call or plan); None for
        # a run without deferred tools, also inside another agent's run.
        loads = loading(LoadedTools() if self.registry.deferred_names else None)
        try:
            if self.tracing is None:
                return await self._traced_loop(prompt, history, emit, resume)
            with tracing_enabled(self.tracing):  # for the run's plans too
                return await self._traced_loop(prompt, history, emit, resume)
        finally:
            reset_loading(loads)
            reset_run_deps(token)

    async def _traced_loop(
        self,
        prompt: str,
        history: Sequence[ModelMessage],
        emit: Callable[[AgentEvent], None] | None,
        resume: Resume | None,
    ) -> AgentResult[OutputT]:
        tracer = get_tracer()
        if tracer is None:
            return await self._loop(prompt, history, emit, None, resume)
        from ..tracing._internal import agent_span, record_run

        with agent_span(tracer, self.name, self.model.name) as span:
            result = await self._loop(prompt, history, emit, tracer, resume)
            record_run(span, result.usage.input_tokens, result.usage.output_tokens, result.status)
            return result

    async def _loop(
        self,
        prompt: str,
        history: Sequence[ModelMessage],
        emit: Callable[[AgentEvent], None] | None,
        tracer: Tracer | None,
        resume: Resume | None = None,
    ) -> AgentResult[OutputT]:
        meta = self.meta_tools()
        definitions = self.tool_definitions(meta)
        loaded = loaded_tools()  # their definitions are appended to `definitions`, in the order loaded
        shown = 0
        messages: list[ModelMessage] = []
        if resume is not None:  # a turn that waited for approval: its conversation so far
            messages.extend(resume[0].messages)
            new_from = resume[0].new_message_index
        else:
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
            approval=self.approval,
            on_approval=self.on_approval,
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
        if self.spend is not None:
            run.meter = SpendMeter(self.spend, self.model)
        result: AgentResult[OutputT] | None = None
        if resume is not None:
            resumed = await resume_turn(run, resume[0], resume[1])
            if ctx.waiting:  # still waiting (some steps were left unanswered)
                return self._waiting(run, resumed)
            messages.extend(r for r in resumed if r is not None)
        for iteration in range(1, self.max_iterations + 1):
            if run.meter is not None:
                refused = await run.spend_refusal()
                if refused is not None:
                    result = self._stopped(run, "usage_limit", *refused)
                    break
            if emit is not None:
                emit(ModelRequestStarted(iteration=iteration))
            if loaded is not None and len(loaded) > shown:
                new = list(loaded.names)[shown:]
                definitions = [*definitions, *(self.registry.definition(n) for n in new)]
                shown = len(loaded)
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
                tool_calls = response.message.tool_calls
                if run.meter is not None:
                    refused = await run.spend_refusal(response.usage)
                    if refused is not None:
                        for plan in streamed.values():
                            plan.abort("Cancelled: the agent run's model spend cap was reached.")
                        if not tool_calls:  # its text is the partial output; calls never run stay out
                            messages.append(response.message)
                        result = self._stopped(run, "usage_limit", *refused)
                        break
                messages.append(response.message)
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
                if ctx.waiting:  # a plan waits for a person's answer: the turn ends here
                    answered = [None if c.id in ctx.waiting else replies.get(c.id) for c in tool_calls]
                    result = self._waiting(run, answered)
                    break
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

    def _waiting(self, run: RunState, replies: Sequence[ToolReturnMessage | None]) -> AgentResult[OutputT]:
        """The result of a run whose turn waits for approval (`AgentResult.waiting` holds the turn)."""
        output: Any = "" if self._output is None else None
        return waiting_result(run, run.result(output, "pending_approval"), replies)

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
        error.usage = partial.usage
        error.money = partial.money
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
