from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from schedules_support import T0, Clock, add, run_the_queued_run

from toolplan import ToolError
from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.schedules._when import parse_when
from toolplan.store import open_store, resume

PLAN = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 20, "b": 22}}]}


async def test_a_due_schedule_fires_one_queued_run_that_runs_and_stores_its_result(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        created = await tools.schedule_create("answer", PLAN, "every 1m")
        assert created["kind"] == "every" and created["next_at"] == T0 + 60
        scheduler = Scheduler(store, clock=clock)
        assert await scheduler.tick() == []  # not due yet
        clock.now = T0 + 61
        (firing,) = await scheduler.tick()
        assert firing.schedule_id == created["schedule_id"] and firing.due_at == T0 + 60 and firing.missed == 0
        assert firing.run_id is not None
        assert await scheduler.tick() == []  # fired once: next at T0 + 120
        run_id = await run_the_queued_run(store, firing, created["schedule_id"])
        (listed,) = await tools.schedule_list()
        assert listed["fired"] == 1 and listed["next_at"] == T0 + 120
        (recorded,) = await scheduler.rows.firings(created["schedule_id"])
        assert recorded.run_id == run_id and recorded.fired_at == T0 + 61


async def test_two_schedulers_racing_on_one_database_fire_each_due_time_once(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as one, open_store(store_url) as two:
        tools = ScheduleTools(one, [add], clock=clock)
        ids = [(await tools.schedule_create(f"s{i}", PLAN, "every 10s"))["schedule_id"] for i in range(5)]
        schedulers = [Scheduler(one, clock=clock), Scheduler(two, clock=clock)]
        fired: list[str | None] = []
        for turn in range(1, 4):
            clock.now = T0 + 10 * turn + 1
            for made in await asyncio.gather(*(s.tick() for s in schedulers)):
                fired.extend(f.run_id for f in made)
        assert len(fired) == len(set(fired)) == 15  # 5 schedules x 3 due times, none twice
        runs = await one.list_runs(limit=100)
        assert len(runs) == 15 and {r.parent_id for r in runs} == set(ids)
        firings = await schedulers[0].rows.firings(limit=100)
        assert len(firings) == 15


async def test_a_schedule_missed_while_no_scheduler_ran_fires_once_or_is_skipped(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        once = await tools.schedule_create("catch up", PLAN, "every 1h")
        skip = await tools.schedule_create("skip", PLAN, "every 1h", catch_up="skip")
        clock.now = T0 + 10 * 3600 + 5  # ten due times passed
        made = {f.schedule_id: f for f in await Scheduler(store, clock=clock).tick()}
        assert made[once["schedule_id"]].run_id is not None and made[once["schedule_id"]].missed == 9
        assert made[skip["schedule_id"]].run_id is None
        for row in await tools.schedule_list():
            assert row["next_at"] == T0 + 11 * 3600
        assert len(await store.list_runs()) == 1


async def test_a_one_shot_fires_once_then_has_no_next_time(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        created = await tools.schedule_create("later", PLAN, "in 90s")
        assert created["kind"] == "once" and created["next_at"] == T0 + 90
        clock.now = T0 + 100
        scheduler = Scheduler(store, clock=clock)
        assert len(await scheduler.tick()) == 1
        clock.now = T0 + 10_000
        assert await scheduler.tick() == []
        (row,) = await tools.schedule_list()
        assert row["next_at"] is None and row["fired"] == 1


async def test_update_pauses_and_resumes_and_delete_removes(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        sid = (await tools.schedule_create("paused", PLAN, "every 1m"))["schedule_id"]
        await tools.schedule_update(sid, enabled=False)
        clock.now = T0 + 3600
        scheduler = Scheduler(store, clock=clock)
        assert await scheduler.tick() == []
        resumed = await tools.schedule_update(sid, enabled=True)
        assert resumed["enabled"] and resumed["next_at"] == T0 + 3660
        changed = await tools.schedule_update(sid, when="0 9 * * *", timezone="Europe/Paris", name="daily")
        paris_nine = datetime(2027, 1, 16, 9, 0, tzinfo=ZoneInfo("Europe/Paris")).timestamp()
        assert changed["kind"] == "cron" and changed["next_at"] == paris_nine and changed["name"] == "daily"
        assert (await tools.schedule_delete(sid))["deleted"] is True
        assert (await tools.schedule_delete(sid))["deleted"] is False
        with pytest.raises(ToolError, match="No schedule"):
            await tools.schedule_update(sid, enabled=True)


def test_cron_follows_the_time_zone_across_daylight_saving() -> None:
    # 2027-03-28 is the spring change in Paris: 09:00 local is 07:00 UTC after it, 08:00 UTC before.
    before = datetime(2027, 3, 27, 12, tzinfo=ZoneInfo("UTC")).timestamp()
    w = parse_when("0 9 * * *", "Europe/Paris", before)
    assert w.kind == "cron" and w.first == datetime(2027, 3, 28, 7, tzinfo=ZoneInfo("UTC")).timestamp()


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("0 0 30 2 *", "never fires"),
        ("61 * * * *", "not a cron expression"),
        ("every 0s", "from 1 second"),
        ("every 400d", "from 1 second"),
        ("in forever", "with a unit"),
        ("2027-13-45T99:00", "not an ISO 8601 time"),
        ("x" * 500, "at most 200"),
        ("", "non-empty"),
    ],
)
def test_hostile_when_is_refused_with_the_way_to_write_it(when: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        parse_when(when, "UTC", T0)


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ToolError, match="IANA"):
        parse_when("every 1m", "Mars/Olympus", T0)


async def test_a_plan_with_a_missing_tool_or_too_big_is_refused_and_nothing_is_stored(store_url: str) -> None:
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add])
        bad = {"steps": [{"id": "s", "tool": "delete_everything", "arguments": {}}]}
        with pytest.raises(ToolError, match="delete_everything"):
            await tools.schedule_create("bad", bad, "every 1m")
        huge = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2, "pad": "x" * 300_000}}]}
        with pytest.raises(ToolError, match="at most"):
            await tools.schedule_create("huge", huge, "every 1m")
        with pytest.raises(ToolError, match="name"):
            await tools.schedule_create("n" * 201, PLAN, "every 1m")
        assert await tools.schedule_list() == []


async def test_the_tools_work_from_a_plan_with_their_annotations(store_url: str) -> None:
    from toolplan import execute_plan

    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add])
        annotations = {d.name: d.annotations for d in tools.definitions()}
        assert annotations["schedule_list"].read_only and not annotations["schedule_create"].read_only
        assert annotations["schedule_delete"].destructive and annotations["schedule_update"].idempotent
        plan = {
            "steps": [
                {"id": "make", "tool": "schedule_create",
                 "arguments": {"name": "n", "plan": PLAN, "when": "*/5 * * * *"}},
                {"id": "list", "tool": "schedule_list", "arguments": {}, "depends_on": ["make"]},
            ]
        }  # fmt: skip
        result = await execute_plan(plan, [tools])
        assert result.ok, result.errors
        assert result.steps["list"].output[0]["spec"] == "*/5 * * * *"


@pytest.mark.slow
async def test_the_scheduler_command_fires_a_missed_schedule_once_and_runs_it(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(
        "def add(a: int, b: int) -> int:\n    '''Add two numbers.'''\n    return a + b\n", encoding="utf-8"
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    an_hour_ago = Clock(time.time() - 3600)
    async with open_store(url) as store:
        sid = (await ScheduleTools(store, [add], clock=an_hour_ago).schedule_create("late", PLAN, "every 1m"))[
            "schedule_id"
        ]
    command = [sys.executable, "-m", "toolplan", "scheduler", "--db", url, "--tools", "tools.py", "--once"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = await asyncio.to_thread(
        subprocess.run, command, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{sid}: fired {sid}-" in proc.stderr and ": succeeded" in proc.stdout
    async with open_store(url) as store:
        (run,) = await store.list_runs()
        info = await store.get_run(run.run_id)
        (firing,) = await Scheduler(store).rows.firings(sid)
    assert info.result.steps["s"].output == 42 and firing.run_id == run.run_id and firing.missed in (59, 60)


async def test_a_stored_plan_is_scheduled_by_its_id(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        first = await tools.schedule_create("first", PLAN, "every 1m")
        again = await tools.schedule_create("same plan", first["plan_id"], "in 30s")
        assert again["plan_id"] == first["plan_id"]
        with pytest.raises(ToolError, match="No plan 'plan_missing'"):
            await tools.schedule_create("none", "plan_missing", "in 30s")
        clock.now = T0 + 31
        (firing,) = await Scheduler(store, clock=clock).tick()
        assert firing.schedule_id == again["schedule_id"]
        result = await resume(await store.claim_next() or "", [add], store=store)
        assert result.steps["s"].output == 42


async def test_a_due_time_that_fired_before_does_not_fire_again_after_an_update(store_url: str) -> None:
    clock = Clock()
    async with open_store(store_url) as store:
        tools = ScheduleTools(store, [add], clock=clock)
        at = "2027-01-15T08:05:00+00:00"  # T0 + 300
        sid = (await tools.schedule_create("once", PLAN, at))["schedule_id"]
        clock.now = T0 + 301
        scheduler = Scheduler(store, clock=clock)
        assert len(await scheduler.tick()) == 1
        await tools.schedule_update(sid, when=at)  # the same time again
        assert await scheduler.tick() == []
        (row,) = await tools.schedule_list()
        assert row["next_at"] is None and row["fired"] == 1 and len(await store.list_runs()) == 1
