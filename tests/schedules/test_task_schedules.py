"""Task schedules: a task in plain words, planned by the scheduler's planner at each firing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from schedules_support import T0, Clock, add, run_the_queued_run

from toolplan import ToolError
from toolplan.models import AssistantMessage, ToolCall, UserMessage
from toolplan.planner import SUBMIT_TOOL_NAME, Planner
from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.store import open_store
from toolplan.testing import Canned, FakeProvider, ScriptedModel, openai_tool_call

TASK = "Add twenty and twenty-two."
PLAN = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 20, "b": 22}}]}
WRONG = {"steps": [{"id": "s", "tool": "subtract", "arguments": {"a": 20, "b": 22}}]}


def submit(plan: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id="p1", name=SUBMIT_TOOL_NAME, arguments=json.dumps(plan)),))


def asked(model: ScriptedModel) -> list[str]:
    """The user messages of each request the model received."""
    return [m.content for r in model.requests for m in r.messages if isinstance(m, UserMessage)]


async def test_a_task_schedule_is_planned_at_its_firing_and_its_plan_runs(store_url: str) -> None:
    clock = Clock()
    model = ScriptedModel([submit(PLAN)])
    async with open_store(store_url) as store:
        planner = Planner(model, [add])
        tools = ScheduleTools(store, [add], clock=clock, planner=planner)
        created = await tools.schedule_create("sum", when="in 30s", task=TASK)
        assert created["task"] == TASK and created["plan_id"] is None and created["next_at"] == T0 + 30
        scheduler = Scheduler(store, clock=clock, planner=planner)
        assert await scheduler.tick() == [] and model.requests == []  # not due: the model is not asked
        clock.now = T0 + 31
        (firing,) = await scheduler.tick()
        assert firing.error is None and firing.run_id == f"{created['schedule_id']}-{round((T0 + 30) * 1000)}"
        assert asked(model) == [TASK]
        model.assert_consumed()
        run_id = await run_the_queued_run(store, firing, created["schedule_id"])
        (listed,) = await tools.schedule_list()
        assert listed["fired"] == 1 and listed["next_at"] is None  # a one-shot: done
        (recorded,) = await scheduler.rows.firings(created["schedule_id"])
        assert recorded.run_id == run_id and recorded.error is None


async def test_a_plan_still_invalid_after_the_repair_records_a_failed_firing_and_no_run(store_url: str) -> None:
    clock = Clock()
    model = ScriptedModel([submit(WRONG), submit(WRONG)])  # the plan, then its repair: both name a missing tool
    async with open_store(store_url) as store:
        planner = Planner(model, [add])
        sid = (
            await ScheduleTools(store, [add], clock=clock, planner=planner).schedule_create(
                "sum", when="every 1m", task=TASK
            )
        )["schedule_id"]
        clock.now = T0 + 61
        (firing,) = await Scheduler(store, clock=clock, planner=planner).tick()
        model.assert_consumed()
        assert firing.run_id is None and firing.error is not None
        assert "invalid after its repair" in firing.error and "subtract" in firing.error
        (recorded,) = await Scheduler(store).rows.firings(sid)
        assert recorded.error == firing.error and recorded.run_id is None
        assert await store.list_runs() == []
        (listed,) = await ScheduleTools(store).schedule_list()
        assert listed["fired"] == 0 and listed["next_at"] == T0 + 120  # it moves on to its next time


async def test_a_scheduler_without_a_planner_or_with_a_failing_model_records_why(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock, planner=Planner(ScriptedModel([]), [add]))
        sid = (await tools.schedule_create("sum", when="every 1m", task=TASK))["schedule_id"]
        clock.now = T0 + 61
        (firing,) = await Scheduler(store, clock=clock).tick()
        assert firing.run_id is None and firing.error is not None and "--model" in firing.error
        clock.now = T0 + 121
        broken = ScriptedModel([RuntimeError("model down")])
        (firing,) = await Scheduler(store, clock=clock, planner=Planner(broken, [add])).tick()
        assert firing.run_id is None and firing.error == "The planner failed: RuntimeError: model down"
        assert [f.due_at for f in await Scheduler(store).rows.firings(sid)] == [T0 + 120, T0 + 60]
        assert await store.list_runs() == []


async def test_task_and_plan_both_or_neither_and_tasks_without_a_planner_are_refused(store_url: str) -> None:
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], planner=Planner(ScriptedModel([]), [add]))
        with pytest.raises(ToolError, match=r"exactly one of plan .* not both"):
            await tools.schedule_create("x", PLAN, "every 1m", task=TASK)
        with pytest.raises(ToolError, match=r"exactly one of plan .* not neither"):
            await tools.schedule_create("x", when="every 1m")
        with pytest.raises(ToolError, match="task must be a non-empty string"):
            await tools.schedule_create("x", when="every 1m", task="t" * 8001)
        with pytest.raises(ToolError, match="no planner model"):
            await ScheduleTools(store, [add]).schedule_create("x", when="every 1m", task=TASK)
        with pytest.raises(ToolError, match="when must be"):
            await tools.schedule_create("x", task=TASK)
        assert await tools.schedule_list() == []


async def test_two_schedulers_racing_on_a_task_schedule_fire_it_once(store_url: str) -> None:
    clock = Clock()
    model = ScriptedModel([submit(PLAN)] * 6)  # each scheduler may plan each due time; only one queues it
    async with open_store(store_url) as one, open_store(store_url) as two:
        planner = Planner(model, [add])
        tools = ScheduleTools(one, [add], clock=clock, planner=planner)
        sid = (await tools.schedule_create("sum", when="every 10s", task=TASK))["schedule_id"]
        schedulers = [Scheduler(one, clock=clock, planner=planner), Scheduler(two, clock=clock, planner=planner)]
        fired: list[str | None] = []
        for turn in range(1, 4):
            clock.now = T0 + 10 * turn + 1
            for made in await asyncio.gather(*(s.tick() for s in schedulers)):
                fired.extend(f.run_id for f in made)
        assert len(fired) == len(set(fired)) == 3 and None not in fired
        runs = await one.list_runs(limit=100)
        assert len(runs) == 3 and {r.parent_id for r in runs} == {sid}
        assert len(await schedulers[0].rows.firings(sid)) == 3


@pytest.mark.slow
async def test_the_scheduler_command_with_a_model_plans_a_task_and_runs_it(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason="--model openai:... needs toolplan[openai]")
    (tmp_path / "tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b\n", encoding="utf-8"
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    a_minute_ago = Clock(time.time() - 60)
    async with open_store(url) as store:
        tools = ScheduleTools(store, [add], clock=a_minute_ago, planner=Planner(ScriptedModel([]), [add]))
        sid = (await tools.schedule_create("sum", when="in 30s", task=TASK))["schedule_id"]
    with FakeProvider() as provider:
        provider.queue(Canned(body=openai_tool_call(SUBMIT_TOOL_NAME, PLAN, call_id="call_1")))
        command = [sys.executable, "-m", "toolplan", "scheduler", "--db", url, "--tools", "tools.py", "--once",
                   "--model", "openai:scripted"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OPENAI_BASE_URL": f"{provider.url}/v1",
               "OPENAI_API_KEY": "sk-scripted"}  # fmt: skip
        proc = await asyncio.to_thread(
            subprocess.run, command, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
        )
        assert proc.returncode == 0, proc.stderr
        (request,) = provider.requests
        assert provider.unused == 0 and TASK in json.dumps(request.body)
    assert f"{sid}: fired {sid}-" in proc.stderr and ": succeeded" in proc.stdout
    async with open_store(url) as store:
        (run,) = await store.list_runs()
        info = await store.get_run(run.run_id)
    assert info.result.steps["s"].output == 42 and run.parent_id == sid


@pytest.mark.slow
def test_the_scheduler_command_refuses_a_model_without_tools(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "toolplan", "scheduler", "--db", f"sqlite:///{tmp_path / 'r.db'}", "--no-run",
               "--model", "openai:scripted", "--once"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode != 0 and "pass --tools" in proc.stderr


async def test_a_version_7_database_gains_the_task_and_error_columns_on_open(store_url: str) -> None:
    import sqlalchemy as sa

    from toolplan.store._schema import SCHEMA_VERSION

    async with open_store(store_url) as store:
        assert await ScheduleTools(store).schedule_list() == []  # the schema is made on first use
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:  # back to version 7, as toolplan left it before task schedules
        conn.execute(sa.text("ALTER TABLE toolplan_schedules DROP COLUMN task"))
        conn.execute(sa.text("ALTER TABLE toolplan_schedule_firings DROP COLUMN error"))
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '7' WHERE key = 'schema_version'"))
    clock = Clock()
    async with open_store(store_url) as store:
        planner = Planner(ScriptedModel([submit(WRONG), submit(WRONG)]), [add])
        tools = ScheduleTools(store, [add], clock=clock, planner=planner)
        await tools.schedule_create("sum", when="in 1s", task=TASK)
        clock.now = T0 + 2
        (firing,) = await Scheduler(store, clock=clock, planner=planner).tick()
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT value FROM toolplan_meta WHERE key = 'schema_version'")).scalar()
    engine.dispose()
    assert firing.error is not None and version == str(SCHEMA_VERSION)
