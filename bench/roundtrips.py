"""Benchmark 3: model round-trips, tokens and wall time per task in three agent modes.

See `bench.agent_sim` for the scripted model, the token accounting and the simulated latency, and
`bench.tasks` for the task suite. Plan mode really runs each plan through ``toolplan.execute_plan``;
its tool message is ``PlanResult.to_model_text()`` (output steps only), the others' are the tool
results verbatim.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import agent_sim, common, tokens
from .agent_sim import MODES
from .tasks import LATENCY, TASKS, set_latency_scale

FULL_SCALE = 1.0
QUICK_SCALE = 0.05


async def run(*, quick: bool, reps: int | None) -> dict[str, Any]:
    scale = QUICK_SCALE if quick else FULL_SCALE
    set_latency_scale(scale)
    nreps = 1 if quick else (reps or 2)
    rows: list[dict[str, Any]] = []
    for task in TASKS:
        runs: dict[str, list[agent_sim.Conversation]] = {m: [] for m in MODES}
        for r in range(nreps):
            for mode in common.rotate(list(MODES), r):
                run_one = agent_sim.run_with_agent if agent_sim.agent_available() else agent_sim.run_conversation
                runs[mode].append(await run_one(task, mode, scale=scale))  # type: ignore[arg-type]
        by_mode: dict[str, Any] = {}
        for mode, convs in runs.items():
            first = convs[0]
            d = asdict(first)
            d["wall_s"] = common.summarize([c.wall_s for c in convs])
            by_mode[mode] = d
        react_in = by_mode["react"]["input_tokens"]
        row = {
            "task": task.name,
            "shape": task.shape,
            "tool_calls": by_mode["plan"]["tool_calls"],
            "modes": by_mode,
            "input_token_ratio_react_to_plan": react_in / by_mode["plan"]["input_tokens"],
            "input_token_ratio_parallel_to_plan": by_mode["parallel"]["input_tokens"] / by_mode["plan"]["input_tokens"],
            "wall_ratio_react_to_plan": by_mode["react"]["wall_s"]["median"] / by_mode["plan"]["wall_s"]["median"],
        }
        rows.append(row)
        common.log(
            f"roundtrips {task.name:15} "
            + " ".join(
                f"{m}: {by_mode[m]['requests']} req {by_mode[m]['input_tokens']} in "
                f"{by_mode[m]['output_tokens']} out {by_mode[m]['wall_s']['median']:.2f}s"
                for m in MODES
            )
        )
    return {"tasks": rows}


def main(args: Any, argv: list[str]) -> Path:
    scale = QUICK_SCALE if args.quick else FULL_SCALE
    data = common.header(
        "roundtrips",
        quick=args.quick,
        argv=argv,
        tokenizer=tokens.name(),
        model_latency=f"{scale:g} x ({agent_sim.MODEL_FIXED_S * 1000:g} ms per request + "
        f"{agent_sim.PREFILL_S_PER_TOKEN * 1e6:g} µs per input token + "
        f"{agent_sim.DECODE_S_PER_TOKEN * 1000:g} ms per output token)",
        tool_latency_s={k: v * scale for k, v in LATENCY.items()},
        agent_loop="toolplan.agent.Agent (native executor; tool_planning=True in plan mode)"
        if agent_sim.agent_available()
        else "bench.agent_sim.run_conversation",
        input_tokens="whole request body (tool definitions + every message, OpenAI chat format JSON), summed over "
        "requests",
        output_tokens="the assistant message (text or tool calls as JSON)",
    )
    data.update(asyncio.run(run(quick=args.quick, reps=args.reps)))
    return common.write("roundtrips", data, Path(args.out))
