"""Single operations of a step, for `bench.instructions`: ``python -m bench._ops OPERATION K``.

Each operation runs K times after one warm-up; counting instructions for K and for 0 gives the
cost of one operation. The inputs are those of a middle step of the 1,000-step chain.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from toolplan import ResultCache, RunLimits, tool
from toolplan._records import maker
from toolplan.execute import ToolInvoker, execute_compiled, prepare
from toolplan.execute._cache import call_key
from toolplan.execute._result import StepResult
from toolplan.execute._scheduler import Scheduler
from toolplan.plan import Step
from toolplan.plan._resolve import resolve
from toolplan.tools import ToolRegistry

from .overhead import Case, noop

_case = Case("chain", 1_000, seed=0)
_compiled, _ = prepare(_case.plan, [noop], max_steps=1_000)
_step = _compiled.steps["s5"]
_outputs = dict.fromkeys(_case.dag, 1)
_args = {"deps": [1]}
_invoker = ToolInvoker(ToolRegistry([noop]))
_new_step_result = maker(StepResult)  # what the executor makes its records with


@tool(read_only=True, idempotent=True)
async def lookup(deps: list[int]) -> int:
    """A read-only no-op (its results may be shared and cached)."""
    return 1


_lookups = ToolRegistry([lookup])
_one_lookup, _ = prepare({"steps": [{"id": "s", "tool": "lookup", "arguments": _args}]}, _lookups)
_warm_cache = ResultCache(ttl=1e9)  # the warm-up run keeps the result: every counted run is a hit
_cached = RunLimits(cache=_warm_cache)
_hit_key = call_key("lookup", _args)
assert _hit_key is not None


async def _lookup_step(limits: RunLimits | None = None) -> Any:
    return await execute_compiled(_one_lookup, ToolInvoker(_lookups), limits=limits)


async def _cache_lookup() -> Any:
    key = call_key("lookup", _args)
    assert key is not None
    return await _warm_cache.get(key)


def _function_call() -> None:
    """Nothing: timing it measures the call itself."""


def _scheduler_step() -> None:
    # A scheduler made for two steps, each added, taken and finished.
    sched = Scheduler(max_concurrency=10)
    sched.add("a", "noop", ())
    sched.add("b", "noop", ("a",))
    sched.finish(sched.take_ready()[0], succeeded=True)
    sched.finish(sched.take_ready()[0], succeeded=True)


OPERATIONS: dict[str, tuple[str, Callable[[], Any]]] = {
    "function_call": ("a Python function call (no arguments)", _function_call),
    "step_record": (
        "`StepResult(...)`, the frozen record of one step (11 fields)",
        lambda: StepResult(
            id="s5",
            tool="noop",
            status="succeeded",
            output=1,
            error=None,
            attempts=1,
            started_at=1.0,
            ended_at=2.0,
            arguments=_args,
            used_fallback=False,
            warnings=(),
        ),
    ),
    "step_record_maker": (
        "the same record made by `maker(StepResult)`, as the executor makes it",
        lambda: _new_step_result(
            id="s5",
            tool="noop",
            status="succeeded",
            output=1,
            error=None,
            attempts=1,
            started_at=1.0,
            ended_at=2.0,
            arguments=_args,
            used_fallback=False,
            warnings=(),
        ),
    ),
    "step_ir": (
        "`Step(...)`, the plan IR's step (10 fields)",
        lambda: Step(id="s5", tool="noop", arguments=_args, depends_on=(), timeout=None, retry=None),
    ),
    "validate_arguments": (
        "pydantic's validation of the no-op tool's arguments (`deps: list[int]`)",
        lambda: noop._validate(_args),
    ),
    "scheduler": (
        "scheduler bookkeeping per step (a scheduler for two steps, each added, taken, finished; / 2)",
        _scheduler_step,
    ),
    "resolve": ('resolving `{"deps": ["$ref:s4"]}`', lambda: resolve(_step.arguments, _outputs)),
}
ASYNC_OPERATIONS: dict[str, tuple[str, Callable[[], Coroutine[Any, Any, Any]]]] = {
    "tool_call": (
        "one `ToolInvoker.call` of the no-op tool, validation included",
        lambda: _invoker.call("noop", _args),
    ),
    "bare_function": ("awaiting the no-op function itself", lambda: noop.function(deps=[1])),
    "one_step_run": (
        "a whole run of a one-step plan calling a read-only no-op tool (`execute_compiled`)",
        lambda: _lookup_step(),
    ),
    "one_step_run_cache_hit": (
        "the same run with a warm `ResultCache`: the step's result is a hit, the tool is not called",
        lambda: _lookup_step(_cached),
    ),
    "cache_lookup": (
        "the hit itself: canonical key of the arguments and `ResultCache.get` (in memory)",
        _cache_lookup,
    ),
}
DIVISOR = {"scheduler": 2}


async def _run(name: str, k: int) -> None:
    if name in OPERATIONS:
        op = OPERATIONS[name][1]
        for _ in range(k + 1):
            op()
    else:
        aop = ASYNC_OPERATIONS[name][1]
        for _ in range(k + 1):
            await aop()


if __name__ == "__main__":
    asyncio.run(_run(sys.argv[1], int(sys.argv[2])))
