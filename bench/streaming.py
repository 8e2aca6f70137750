"""Benchmark 4: streamed plans: time from the first plan token to the first tool start, and total.

The model "writes" the ``execute_tool_plan`` arguments (the plan JSON) at ``TOKENS_PER_S``; the
text is cut into as many chunks as it has tokens (see `bench.tokens`) and yielded one chunk per
token interval.

- ``wait``: collect the whole plan, then ``execute_plan`` it (what every agent does today).
- ``streamed``: ``toolplan.execute.execute_plan_stream`` reads the same chunks and dispatches each
  step as soon as its JSON is complete and its inputs are ready (what ``Agent(stream_plans=True)`` does
  with a model's streamed ``execute_tool_plan`` call).
- ``ideal``: an analytic bound, not a measurement: each step starts when the token stream has
  completed its JSON object and its dependencies have finished, and takes exactly its tool's latency.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from toolplan.execute import PlanEvent, PlanResult, StepStarted, execute_plan, execute_plan_stream
from toolplan.tools import ToolsLike

from . import common, tokens
from .agent_sim import _deps
from .tasks import LATENCY, TASKS, Task, set_latency_scale

TOKENS_PER_S = 50.0
FULL_SCALE = 1.0
QUICK_SCALE = 0.05
TASK_NAMES = ("fanout8", "search_compute", "chain5")

StreamedExecutor = Callable[[AsyncIterator[str], ToolsLike, Callable[[PlanEvent], None]], Awaitable[PlanResult]]


def streamed_executor() -> StreamedExecutor | None:
    """toolplan's streaming-plan executor: ``async (chunks, tools, on_event) -> PlanResult``."""

    async def run(chunks: AsyncIterator[str], tools: ToolsLike, on_event: Callable[[PlanEvent], None]) -> PlanResult:
        return await execute_plan_stream(chunks, tools, on_event=on_event)

    return run


def chunks_of(text: str) -> list[str]:
    n = max(1, tokens.count(text))
    size = len(text) / n
    return [text[round(i * size) : round((i + 1) * size)] for i in range(n)]


async def token_stream(parts: list[str], interval: float, t0: list[float]) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    t0.append(start)
    for i, part in enumerate(parts):
        delay = start + (i + 1) * interval - loop.time()  # token i is complete at (i + 1) * interval
        if delay > 0:
            await asyncio.sleep(delay)
        yield part


async def run_wait(task: Task, parts: list[str], interval: float) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    t0: list[float] = []
    first: list[float] = []

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepStarted) and not first:
            first.append(loop.time())

    text = "".join([p async for p in token_stream(parts, interval, t0)])
    result = await execute_plan(json.loads(text), task.tools, on_event=on_event)
    end = loop.time()
    assert result.ok, result.errors
    return {"first_tool_start_s": first[0] - t0[0], "total_s": end - t0[0]}


async def run_streamed(task: Task, parts: list[str], interval: float, executor: StreamedExecutor) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    t0: list[float] = []
    first: list[float] = []

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepStarted) and not first:
            first.append(loop.time())

    result = await executor(token_stream(parts, interval, t0), task.tools, on_event)
    end = loop.time()
    assert result.ok, result.errors
    return {"first_tool_start_s": first[0] - t0[0], "total_s": end - t0[0]}


def ideal(task: Task, text: str, parts: list[str], interval: float, scale: float) -> dict[str, float]:
    """Analytic bound for streamed dispatch (no engine overhead, no parse cost)."""
    ends = []  # character offset at which each step's JSON object is complete
    pos = 0
    for step in task.plan["steps"]:
        frag = json.dumps(step, ensure_ascii=False)
        at = text.index(frag, pos)
        pos = at + len(frag)
        ends.append(pos)
    char_time: list[float] = []
    acc = 0
    for i, p in enumerate(parts):
        acc += len(p)
        char_time.extend([(i + 1) * interval] * len(p))
    finish: dict[str, float] = {}
    starts = []
    for step, end in zip(task.plan["steps"], ends, strict=True):
        ready = char_time[end - 1]
        start = max([ready, *(finish[d] for d in _deps(step["arguments"]))])
        starts.append(start)
        finish[step["id"]] = start + LATENCY[step["tool"]] * scale
    stream_end = len(parts) * interval
    return {"first_tool_start_s": min(starts), "total_s": max(stream_end, *finish.values())}


async def run(*, quick: bool, reps: int | None) -> dict[str, Any]:
    scale = QUICK_SCALE if quick else FULL_SCALE
    set_latency_scale(scale)
    interval = scale / TOKENS_PER_S
    nreps = 1 if quick else (reps or 3)
    executor = streamed_executor()
    rows: list[dict[str, Any]] = []
    for task in (t for t in TASKS if t.name in TASK_NAMES):
        text = json.dumps(task.plan, ensure_ascii=False)
        parts = chunks_of(text)
        samples: dict[str, list[dict[str, float]]] = {"wait": [], "streamed": []}
        for _ in range(nreps):
            common.settle()
            samples["wait"].append(await run_wait(task, parts, interval))
            if executor is not None:
                common.settle()
                samples["streamed"].append(await run_streamed(task, parts, interval, executor))

        def med(mode: str, key: str, s: dict[str, list[dict[str, float]]] = samples) -> float:
            return common.median([x[key] for x in s[mode]])

        row: dict[str, Any] = {
            "task": task.name,
            "plan_tokens": len(parts),
            "plan_chars": len(text),
            "stream_s": len(parts) * interval,
            "wait": {k: med("wait", k) for k in ("first_tool_start_s", "total_s")},
            "streamed": {k: med("streamed", k) for k in ("first_tool_start_s", "total_s")}
            if executor is not None
            else "pending",
            "ideal_streamed_bound": ideal(task, text, parts, interval, scale),
            "samples": samples,
        }
        rows.append(row)
        common.log(
            f"streaming {task.name:15} tokens={len(parts)} wait first={row['wait']['first_tool_start_s']:.3f}s "
            f"total={row['wait']['total_s']:.3f}s ideal first={row['ideal_streamed_bound']['first_tool_start_s']:.3f}s "
            f"total={row['ideal_streamed_bound']['total_s']:.3f}s streamed={'measured' if executor else 'pending'}"
        )
    return {"streamed_available": executor is not None, "tasks": rows}


def main(args: Any, argv: list[str]) -> Path:
    scale = QUICK_SCALE if args.quick else FULL_SCALE
    data = common.header(
        "streaming",
        quick=args.quick,
        argv=argv,
        tokenizer=tokens.name(),
        token_rate=f"{TOKENS_PER_S / scale:g} tokens/s (plan text cut into one chunk per token)",
        tool_latency_s={k: v * scale for k, v in LATENCY.items()},
    )
    data.update(asyncio.run(run(quick=args.quick, reps=args.reps)))
    return common.write("streaming", data, Path(args.out))
