"""``toolplan agent TASK``: an agent from the command line, with a test model from a Python file or the built-in one."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Calls, Cli

AGENT_TOOLS = '''
import asyncio
import os

from toolplan import ToolError, tool

_running = 0
_together = asyncio.Event()


def _record(line: str) -> None:
    with open(os.environ["TOOLPLAN_TEST_CALLS"], "a", encoding="utf-8") as f:
        f.write(line + "\\n")


@tool
async def weather(city: str) -> str:
    """The weather of a city (records how many calls run when it starts)."""
    global _running
    _running += 1
    _record(f"start-{city}-{_running}")
    for _ in range(5):  # let any other call of the turn start meanwhile
        await asyncio.sleep(0)
    _running -= 1
    _record(f"end-{city}")
    return f"{city}: mild"


@tool
async def together(city: str) -> str:
    """Ends only once two calls run at once (else, after a while, fails: 'ran alone')."""
    global _running
    _running += 1
    if _running >= 2:
        _together.set()
    try:
        async with asyncio.timeout(20):
            await _together.wait()
    except TimeoutError:
        raise ToolError("ran alone") from None
    finally:
        _running -= 1
    _record(f"together-{city}")
    return f"{city}: mild"
'''

AGENT_MODELS = '''
import json
import os

from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionModel


def play(messages, info):
    """One turn calling AGENT_TOOL (default weather) for Oslo and Rome, then an answer quoting the results."""
    replies = [m for m in messages if isinstance(m, ToolReturnMessage)]
    if not replies:
        tool = os.environ.get("AGENT_TOOL", "weather")
        cities = ("Oslo", "Rome")
        calls = [ToolCall(id=f"c{i}", name=tool, arguments=json.dumps({"city": c})) for i, c in enumerate(cities)]
        return AssistantMessage(tool_calls=tuple(calls))
    return "Answer: " + "; ".join(r.content for r in replies)


MODEL = FunctionModel(play, model_name="two-cities")


def make():
    return FunctionModel(play, model_name="made")


NOT_A_MODEL = 42
'''


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    (tmp_path / "agent_tools.py").write_text(AGENT_TOOLS, encoding="utf-8")
    (tmp_path / "agent_models.py").write_text(AGENT_MODELS, encoding="utf-8")
    return tmp_path


def test_native_runs_a_turns_calls_at_once_and_prints_the_answer_and_the_calls(
    cli: Cli, agent_dir: Path, tool_calls: Calls
) -> None:
    done = cli("agent", "Weather in Oslo and Rome?", "--tools", "agent_tools.py", "--model", "agent_models.py:MODEL",
               "--executor", "native", "--max-tool-calls-per-turn", "50", "--max-concurrent-tools", "20")  # fmt: skip
    assert done.code == 0, done.stderr
    assert sorted(tool_calls()) == ["end-Oslo", "end-Rome", "start-Oslo-1", "start-Rome-2"]
    lines = done.stdout.splitlines()
    assert lines[-1] == "Answer: Oslo: mild; Rome: mild"
    assert any(line.startswith("call 1 │ weather │ succeeded │") for line in lines)
    assert any(line.startswith("call 2 │ weather │ succeeded │") for line in lines)
    assert "2 tool calls, 2 model requests" in done.stderr and "built-in test model" not in done.stderr


def test_sequential_runs_them_one_at_a_time_in_order(cli: Cli, agent_dir: Path, tool_calls: Calls) -> None:
    done = cli("agent", "Weather?", "--tools", "agent_tools.py", "--model", "agent_models.py:make",
               "--executor", "sequential")  # fmt: skip
    assert done.code == 0, done.stderr
    assert tool_calls() == ["start-Oslo-1", "end-Oslo", "start-Rome-1", "end-Rome"]


def test_max_tool_calls_per_turn_leaves_the_rest_unrun_and_tells_the_model(
    cli: Cli, agent_dir: Path, tool_calls: Calls
) -> None:
    done = cli("agent", "Weather?", "--tools", "agent_tools.py", "--model", "agent_models.py:MODEL",
               "--executor", "native", "--max-tool-calls-per-turn", "1", "--json")  # fmt: skip
    assert done.code == 0, done.stderr
    data = done.json()
    assert [c["arguments"] for c in data["tool_calls"]] == [{"city": "Oslo"}]
    assert "at most 1 run per turn" in data["output"] and tool_calls() == ["start-Oslo-1", "end-Oslo"]
    assert (data["status"], data["model"], data["executor"]) == ("completed", "two-cities", "native")
    assert data["usage"]["requests"] == 2


def test_native_calls_of_a_turn_run_together(
    cli: Cli, agent_dir: Path, tool_calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TOOL", "together")  # each call ends only once both have started
    done = cli("agent", "Weather?", "--tools", "agent_tools.py", "--model", "agent_models.py:MODEL",
               "--executor", "native", "--max-concurrent-tools", "2")  # fmt: skip
    assert done.code == 0, done.stderr
    assert sorted(tool_calls()) == ["together-Oslo", "together-Rome"]
    assert done.stdout.splitlines()[-1] == "Answer: Oslo: mild; Rome: mild"


def test_the_default_model_is_the_built_in_test_model_and_plans(cli: Cli, agent_dir: Path, tool_calls: Calls) -> None:
    done = cli("agent", "Weather?", "--tools", "agent_tools.py:weather")
    assert done.code == 0, done.stderr
    assert "built-in test model" in done.stderr
    assert any(line.startswith("plan 1: weather │ weather │ succeeded │") for line in done.stdout.splitlines())
    assert len([c for c in tool_calls() if c.startswith("start-")]) == 1


def test_the_test_model_through_code_mode(cli: Cli, agent_dir: Path, tool_calls: Calls) -> None:
    done = cli("agent", "Weather?", "--tools", "agent_tools.py:weather", "--model", "test", "--executor", "code")
    assert done.code == 0, done.stderr
    assert any(line.startswith("code 1: ") and "│ weather │ succeeded │" in line for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "nowhere.py:MODEL"], "Error: --model 'nowhere.py:MODEL': Model file 'nowhere.py' does not exist."),
        (["--model", "agent_models.py"], "name the model in the file, as --model FILE.py:NAME"),
        (["--model", "agent_models.py:MISSING"], "Model file 'agent_models.py' has no 'MISSING'"),
        (["--model", "agent_models.py:NOT_A_MODEL"], "NOT_A_MODEL is a int, not a toolplan Model"),
        (["--model", "nowhere:thing"], "Unknown model provider 'nowhere'"),
        (["--executor", "sequential", "--max-concurrent-tools", "3"], "does not go with --executor sequential"),
        (["--executor", "parallel"], "'parallel' is not one of"),
        (["--max-tool-calls-per-turn", "0"], "Invalid value for '--max-tool-calls-per-turn'"),
    ],
)
def test_bad_options_are_one_error_line(
    cli: Cli, agent_dir: Path, tool_calls: Calls, extra: list[str], message: str
) -> None:
    done = cli("agent", "Weather?", "--tools", "agent_tools.py", *extra)
    assert done.code == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and tool_calls() == []


def test_agent_needs_tools(cli: Cli) -> None:
    done = cli("agent", "Weather?")
    assert done.code == 2 and "agent needs the tools to call: pass --tools FILE.py[:NAME]." in done.stderr
