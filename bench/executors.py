"""The contenders. Each runs the same DAG with the same step function and returns the sinks' values.

A step function is ``async fn(step_id, dep_values) -> value`` (Dask gets a sync one). Per-tool
concurrency limits are passed as ``limits = {step_id: asyncio.Semaphore}`` to the non-toolplan
executors; toolplan enforces them itself from ``@tool(concurrency=N)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, TypedDict

from toolplan.execute import PlanResult, execute_compiled, prepare
from toolplan.tools import ToolsLike

from .dags import Dag, levels, sinks

StepFn = Callable[[str, list[Any]], Awaitable[Any]]


# -- (a) the floor: a hand-written asyncio dataflow executor ---------------------------------------


async def floor_run(dag: Dag, fn: StepFn) -> list[Any]:
    """One future per step; one task per step awaits its dependencies' futures, then runs.

    This is the least an asyncio dataflow executor can do (no validation, no records, no limits,
    no failure handling): the floor against which toolplan's per-step overhead is compared.
    """
    loop = asyncio.get_running_loop()
    futs: dict[str, asyncio.Future[Any]] = {s: loop.create_future() for s in dag}

    async def one(s: str, deps: tuple[str, ...]) -> None:
        vals = [await futs[d] for d in deps]
        futs[s].set_result(await fn(s, vals))

    async with asyncio.TaskGroup() as tg:
        for s, deps in dag.items():
            tg.create_task(one(s, deps))
    return [futs[s].result() for s in sinks(dag)]


# -- (b) wave barriers: Kahn levels, asyncio.gather per level --------------------------------------


async def wave_run(dag: Dag, fn: StepFn) -> list[Any]:
    """Run level by level: a level starts only when every step of the previous level has finished."""
    values: dict[str, Any] = {}
    for level in levels(dag):
        outs = await asyncio.gather(*(fn(s, [values[d] for d in dag[s]]) for s in level))
        values.update(zip(level, outs, strict=True))
    return [values[s] for s in sinks(dag)]


# -- toolplan --------------------------------------------------------------------------------------


async def toolplan_run(plan: Mapping[str, Any], tools: ToolsLike, *, n: int, max_concurrency: int) -> PlanResult:
    """Validate + compile (``prepare``) and run (``execute_compiled``): what ``execute_plan`` does."""
    compiled, invoker = prepare(plan, tools, max_steps=n)
    return await execute_compiled(compiled, invoker, max_concurrency=max_concurrency)


# -- (c) LangGraph: one node per step, one edge (or join) per dependency ---------------------------


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    # In-place merge: the cheapest reducer (a copying {**a, **b} would make LangGraph O(n^2)).
    a.update(b)
    return a


class _State(TypedDict):
    values: Annotated[dict[str, Any], _merge]


def langgraph_build(dag: Dag, fn: StepFn) -> Any:
    """A StateGraph with one async node per step.

    A step with one dependency gets ``add_edge(dep, step)``; with several, ``add_edge([deps], step)``
    (LangGraph's join: wait for all of them); roots hang off START and sinks go to END. Each node
    reads its inputs from the shared ``values`` channel and writes ``{step: value}`` into it.
    """
    from langgraph.graph import END, START, StateGraph

    g: Any = StateGraph(_State)
    for s, deps in dag.items():

        async def node(state: _State, _s: str = s, _deps: tuple[str, ...] = deps) -> dict[str, Any]:
            vals = state["values"]
            return {"values": {_s: await fn(_s, [vals[d] for d in _deps])}}

        g.add_node(s, node)
    for s, deps in dag.items():
        if not deps:
            g.add_edge(START, s)
        elif len(deps) == 1:
            g.add_edge(deps[0], s)
        else:
            g.add_edge(list(deps), s)
    for s in sinks(dag):
        g.add_edge(s, END)
    return g.compile()


async def langgraph_run(graph: Any, dag: Dag) -> list[Any]:
    final = await graph.ainvoke({"values": {}}, {"recursion_limit": len(dag) + 10})
    return [final["values"][s] for s in sinks(dag)]


# -- (d) Dask threaded scheduler -------------------------------------------------------------------


def dask_graph(dag: Dag, fn: Callable[[list[Any]], Any]) -> dict[str, Any]:
    """``{step: (fn, [dep keys])}``: Dask substitutes the dependency values into the list."""
    return {s: (fn, list(deps)) for s, deps in dag.items()}


def dask_run(dsk: dict[str, Any], keys: Sequence[str], *, num_workers: int | None = None) -> Any:
    import dask.threaded

    return dask.threaded.get(dsk, list(keys), num_workers=num_workers)


__all__ = (
    "StepFn",
    "dask_graph",
    "dask_run",
    "floor_run",
    "langgraph_build",
    "langgraph_run",
    "toolplan_run",
    "wave_run",
)
