"""Conformance, cogent's executors from the command line: ``toolplan agent TASK --executor native|sequential``.

A cogent user sets ``max_tool_calls_per_turn=50, max_concurrent_tools=20, resilience=True`` on a
`NativeExecutor`; the command takes the same words as options. The model is a real OpenAI-compatible
HTTP server on 127.0.0.1 whose first answer is HTTP 429, and the command runs in a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolplan
from toolplan.testing import Canned, FakeProvider, openai_text

pytest.importorskip("openai", reason="--model openai:... needs toolplan[openai]")

TOOLS = '''
import asyncio
import os

from toolplan import ToolError, tool

_running = 0
_both = asyncio.Event()


def _record(line: str) -> None:
    with open(os.environ["CALLS_FILE"], "a", encoding="utf-8") as f:
        f.write(line + "\\n")


@tool
async def weather(city: str) -> str:
    """The weather of a city."""
    global _running
    _running += 1
    _record(f"start {city}")
    if os.environ.get("TOGETHER") and _running >= 2:
        _both.set()
    try:
        if os.environ.get("TOGETHER"):  # each call ends only once both run at once
            async with asyncio.timeout(20):
                await _both.wait()
    except TimeoutError:
        raise ToolError("ran alone") from None
    finally:
        _running -= 1
    _record(f"end {city}")
    return f"{city}: mild"
'''


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _turn(*cities: str) -> list[Canned]:
    """HTTP 429 (retry at once), one turn calling ``weather`` for each city, then the answer."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": c})}}
        for i, c in enumerate(cities)
    ]
    body = openai_text("")
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": calls}
    body["choices"][0]["finish_reason"] = "tool_calls"
    return [
        Canned(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after": "0"}),
        Canned(body=body),
        Canned(body=openai_text("Both are mild.")),
    ]


def _agent(
    provider: FakeProvider, tmp_path: Path, *args: str, together: bool = False
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    src = str(Path(toolplan.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        "OPENAI_BASE_URL": f"{provider.url}/v1",
        "OPENAI_API_KEY": "sk-test",
        "CALLS_FILE": str(tmp_path / "calls.txt"),
        "TOGETHER": "1" if together else "",
    }
    command = [sys.executable, "-m", "toolplan", "agent", "Weather in Oslo and Rome?", "--tools", "tools.py",
               "--model", "openai:gpt-test", *args]  # fmt: skip
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.mark.slow  # a Python process of its own
def test_native_executor_options_run_a_turn_at_once_and_retry_a_rate_limit(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.queue(*_turn("Oslo", "Rome"))
    done = _agent(
        provider, tmp_path, "--executor", "native", "--max-tool-calls-per-turn", "50", "--max-concurrent-tools", "20",
        "--resilience", together=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Both are mild."
    assert len(provider.requests) == 3  # the 429, retried, then the turn after the tool calls
    assert sorted(_calls(tmp_path)) == ["end Oslo", "end Rome", "start Oslo", "start Rome"]
    assert "call 1 │ weather │ succeeded" in done.stdout and "call 2 │ weather │ succeeded" in done.stdout


@pytest.mark.slow
def test_sequential_executor_runs_the_calls_in_order(provider: FakeProvider, tmp_path: Path) -> None:
    provider.queue(*_turn("Oslo", "Rome"))
    done = _agent(provider, tmp_path, "--executor", "sequential")
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == ["start Oslo", "end Oslo", "start Rome", "end Rome"]


@pytest.mark.slow
def test_no_resilience_tries_a_model_request_once(provider: FakeProvider, tmp_path: Path) -> None:
    provider.queue(*_turn("Oslo"))
    done = _agent(provider, tmp_path, "--executor", "native", "--no-resilience")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: the agent run failed: ") and "429" in done.stderr
    assert len(provider.requests) == 1 and _calls(tmp_path) == [] and "Traceback" not in done.stderr
