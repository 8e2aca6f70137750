"""An agent's options: what `Agent` is built with, checks and keeps, and what its model is offered.

The run loop is in `._agent`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import NoneType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, get_origin

from typing_extensions import TypeVar

from .._errors import UserError
from ..execute import ApprovalCallback, ApprovalRule, Backend, ResultCache, RunLimits, RunStore, ToolChooser
from ..models import Model, ModelSettings, SpendLimits, infer_model
from ..plan import META_TOOL_NAMES, Budget
from ..policy import STRATEGIES, StatsStore, Strategy, ToolPolicy
from ..tools import ToolDefinition, ToolRegistry, ToolSearch, ToolsLike
from ._declare import DECLARE_TOOL_NAME, DeclarePlanTool, declare_instructions
from ._executors import ExecutionStrategy
from ._metatools import (
    BATCH_TOOL_NAME,
    PLAN_TOOL_NAME,
    BatchTool,
    MetaTool,
    PlanTool,
    batch_instructions,
    planning_instructions,
)
from ._output import OUTPUT_TOOL_NAME, OutputSpec
from ._result import OutputT
from ._search import SEARCH_TOOL_NAME, SearchTool, search_instructions

if TYPE_CHECKING:
    from ..sandbox import CodeRunner

__all__ = ("DepsT", "OnLimit")

#: The type of ``agent.run(..., deps=...)``, what tools read as ``RunContext[DepsT].deps``.
DepsT = TypeVar("DepsT", default=None)
#: What a run does when it stops at a limit: raise `UsageLimitExceeded` or return the partial result.
OnLimit = Literal["raise", "return"]

# Models set by `Agent.override`, by agent, in the current context (so tasks started inside see them).
_MODEL_OVERRIDES: ContextVar[Mapping[_AgentOptions[Any, Any], Model] | None] = ContextVar(
    "toolplan_model_overrides", default=None
)


class _AgentOptions(Generic[DepsT, OutputT]):
    """What an `Agent` is built with (its arguments are documented there) and what its model is offered."""

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
        spend: SpendLimits | None = None,
        max_concurrent_tools: int | None = None,
        strategy: ExecutionStrategy | str = ExecutionStrategy.NATIVE,
        stream_plans: bool = False,
        settings: ModelSettings | None = None,
        budget: Budget | None = None,
        tool_timeout: float | None = None,
        cache: ResultCache | None = None,
        deps_type: type[DepsT] = NoneType,  # type: ignore[assignment]  # the TypeVar's default
        output_type: type[OutputT] = str,  # type: ignore[assignment]  # the TypeVar's default
        output_retries: int = 1,
        on_limit: OnLimit = "raise",
        store: RunStore | None = None,
        policy: ToolChooser | Strategy | None = None,
        declare_plan: bool = False,
        backend: Backend | None = None,
        tracing: bool | None = None,
        approval: ApprovalRule | None = None,
        on_approval: ApprovalCallback | None = None,
        tool_search: ToolSearch | None = None,
    ) -> None:
        if max_iterations < 1:
            raise UserError(f"max_iterations must be >= 1, got {max_iterations}.")
        if isinstance(max_tool_calls_per_turn, bool) or max_tool_calls_per_turn < 1:
            raise UserError(f"max_tool_calls_per_turn must be >= 1, got {max_tool_calls_per_turn!r}.")
        self.limits = RunLimits.of(
            limits, max_concurrency=max_concurrent_tools, budget=budget, step_timeout=tool_timeout, cache=cache
        )
        self.model = infer_model(model)
        if spend is not None:
            if not isinstance(spend, SpendLimits):
                raise UserError(f"spend must be a toolplan.SpendLimits, got {type(spend).__name__}.")
            spend.check(self._model)  # a money cap needs the model's price: say so now, not mid-run
        self.spend = spend
        self.name = name
        self.instructions = instructions
        registry = ToolRegistry.of(tools)
        clash = [n for n in registry.names if n in META_TOOL_NAMES]
        if clash:
            raise UserError(f"Tool name {clash[0]!r} is reserved for toolplan's meta-tools; rename your tool.")
        self.registry = registry
        if self.limits.cache is not None:
            self.limits.cache.check(registry)
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
        if approval is not None and not isinstance(approval, ApprovalRule):
            raise UserError(f"approval= takes an ApprovalRule, got {type(approval).__name__}.")
        if on_approval is not None and approval is None:
            raise UserError("on_approval= answers the steps a rule marks: pass approval=ApprovalRule(...) as well.")
        self.approval = approval
        self.on_approval = on_approval
        self.tool_search = tool_search if tool_search is not None else ToolSearch()  # its index lasts across runs
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
            # With deferred tools the model may declare any it found: no list of names to check against.
            declarable = [] if self.registry.deferred_names else [d.name for d in self.registry.definitions()]
            out[DECLARE_TOOL_NAME] = DeclarePlanTool(declarable)
        if self.registry.deferred_names:
            out[SEARCH_TOOL_NAME] = SearchTool(self.registry, self.tool_search)
        return out

    def system_prompt(self) -> str:
        """The system prompt: the instructions plus the sections for planning and code."""
        parts = [self.instructions.strip()] if self.instructions.strip() else []
        if self.declare_plan:
            parts.append(declare_instructions())
        if self.registry.deferred_names:
            parts.append(search_instructions())
        if self.tool_planning:
            parts.append(planning_instructions(self.registry.visible_names))
        if self.batch_calls:
            parts.append(batch_instructions())
        if self.code_execution is not None:
            from ._code import code_instructions

            parts.append(code_instructions(self.code_execution))
        if self._output is not None:
            parts.append(self._output.instructions())
        return "\n\n".join(parts)

    def tool_definitions(self, meta: dict[str, MetaTool] | None = None) -> list[ToolDefinition]:
        """The tools offered to the model first: the agent's tools, the meta-tools, then ``final_result``.

        Deferred tools are left out; those a run loads are added after these, in the order loaded.
        """
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
    ) -> Self:
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


def _is_type(value: object) -> bool:
    """A class, or a generic alias of one (``list[int]``)."""
    return isinstance(value, type) or get_origin(value) is not None
