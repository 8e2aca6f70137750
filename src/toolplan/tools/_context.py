"""`RunContext`: what a tool declares as its first parameter to get the run's dependencies.

```python
@tool
def balance(ctx: RunContext[Bank], account: str) -> float:
    return ctx.deps.balance(account)
```

The parameter is not part of the schema the model sees; toolplan fills it in on every call (a
direct call of the agent, a plan step, a step of a streamed plan, a call from code mode).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._context import CallContext, current_call_or_none, run_deps
from .._errors import UserError

__all__ = ("RunContext", "is_run_context", "make_run_context")

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """The run a tool call belongs to: the run's dependencies and the call's own context.

    Declare it as a tool's first parameter, ``ctx: RunContext[MyDeps]``; toolplan passes it in and
    leaves it out of the tool's schema. In a test, build one yourself:
    ``my_tool(RunContext(deps=FakeDeps()), x=1)``.

    Attributes:
        deps: What the agent run was given as ``agent.run(..., deps=...)``. None when the tool runs
            outside an agent run (``execute_plan``, the CLI) or the run was given none.
        call: The `CallContext` of the call (None when the function is called directly).
    """

    deps: DepsT
    call: CallContext | None = None

    def _current(self) -> CallContext:
        if self.call is None:
            raise UserError(
                "This RunContext has no call context: the tool was called directly, not by toolplan. "
                "Read run_id, step_id, attempt and idempotency_key only in calls made by a plan or an "
                "agent, or pass RunContext(deps=..., call=CallContext(...)) in a test."
            )
        return self.call

    @property
    def run_id(self) -> str:
        """The run (plan run, or an agent run's plan, batch or code run) the call belongs to."""
        return self._current().run_id

    @property
    def step_id(self) -> str:
        """The step within that run."""
        return self._current().step_id

    @property
    def attempt(self) -> int:
        """1 for the first attempt, 2 for the first retry, and so on."""
        return self._current().attempt

    @property
    def idempotency_key(self) -> str:
        """``"{run_id}:{step_id}"``: the same for every attempt of one step (see `CallContext`)."""
        return self._current().idempotency_key


def is_run_context(annotation: Any) -> bool:
    """True for ``RunContext`` and ``RunContext[X]`` (an annotation already evaluated)."""
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


def make_run_context() -> RunContext[Any]:
    """The `RunContext` of the tool call running now (built per call, only for tools that ask)."""
    return RunContext(deps=run_deps(), call=current_call_or_none())
