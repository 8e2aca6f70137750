"""``toolplan serve`` fires due schedules, and its own runner runs the runs they queue."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from schedules_support import add, one_finished_run, serving

from toolplan.planner import SUBMIT_TOOL_NAME, Planner
from toolplan.schedules import ScheduleTools
from toolplan.store import open_store
from toolplan.testing import Canned, FakeProvider, ScriptedModel, openai_tool_call

pytest.importorskip("uvicorn", reason="toolplan serve needs toolplan[service]")


PLAN = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2}}]}


def _service_dir(tmp_path: Path) -> str:
    """A tools file and a key file for `toolplan serve` in ``tmp_path``; the store's URL."""
    (tmp_path / "tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b\n", encoding="utf-8"
    )
    (tmp_path / "keys").write_text("tpk_schedules_test_key\n", encoding="utf-8")
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.slow
async def test_serve_fires_a_due_schedule_and_runs_it(tmp_path: Path) -> None:
    url = _service_dir(tmp_path)
    async with open_store(url) as store:
        tools = ScheduleTools(store, [add], clock=lambda: time.time() - 120)
        sid = (await tools.schedule_create("due", PLAN, "in 60s"))["schedule_id"]  # due a minute ago
    with serving(tmp_path, "--tools", "tools.py", "--db", url, "--api-key-file", "keys") as (process, _):
        run, info = await one_finished_run(url, process, tmp_path / "serve.log")
    assert run.parent_id == sid and info.result.steps["s"].output == 3


@pytest.mark.slow
async def test_serve_with_a_model_plans_a_due_task_schedule_and_runs_it(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="--model openai:... needs toolplan[openai]")
    url = _service_dir(tmp_path)
    async with open_store(url) as store:
        planner = Planner(ScriptedModel([]), [add])
        tools = ScheduleTools(store, [add], clock=lambda: time.time() - 120, planner=planner)
        sid = (await tools.schedule_create("due", when="in 60s", task="Add one and two."))["schedule_id"]
    with FakeProvider() as provider:
        provider.queue(Canned(body=openai_tool_call(SUBMIT_TOOL_NAME, PLAN, call_id="call_1")))
        args = ("--tools", "tools.py", "--db", url, "--api-key-file", "keys", "--model", "openai:scripted")
        env = {"OPENAI_BASE_URL": f"{provider.url}/v1", "OPENAI_API_KEY": "sk-scripted"}
        with serving(tmp_path, *args, **env) as (process, _):
            run, info = await one_finished_run(url, process, tmp_path / "serve.log")
        assert run.parent_id == sid and info.result.steps["s"].output == 3
        assert len(provider.requests) == 1 and "Add one and two." in str(provider.requests[0].body)
