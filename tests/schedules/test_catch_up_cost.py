"""Catching up a cron schedule after a long pause costs a bounded number of croniter calls, not one per minute."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from schedules_support import T0, Clock, add

from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.store import open_store

croniter_module = pytest.importorskip("croniter")

PLAN = {"steps": [{"id": "s", "tool": "add", "arguments": {"a": 1, "b": 2}}]}
YEAR = 365 * 86400


@pytest.fixture
def croniter_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every next time croniter computes (what catching up costs)."""
    calls: list[int] = []
    original = croniter_module.croniter.get_next

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(croniter_module.croniter, "get_next", counted)
    return calls


@pytest.mark.parametrize("when", ["* * * * *", "0-59 * * * *", "*/1 0-23 * * *"])
async def test_a_minute_cron_last_fired_a_year_ago_fires_once_at_bounded_cost(
    tmp_path: Path, croniter_calls: list[int], when: str
) -> None:
    clock = Clock()
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        tools = ScheduleTools(store, [add], clock=clock)
        created = await tools.schedule_create("every minute", PLAN, when)
        clock.now = T0 + YEAR + 30  # a year of minutes missed: over half a million due times
        croniter_calls.clear()
        (firing,) = await Scheduler(store, clock=clock).tick()
        assert len(croniter_calls) <= 110  # counted up to 100, then one jump to now
        assert firing.run_id is not None and firing.due_at == created["next_at"]
        assert firing.missed == 100  # counted up to 100: the firing stands for at least that many more
        (listed,) = await tools.schedule_list()
        assert listed["next_at"] == T0 + YEAR + 60  # the first minute after now
        assert datetime.fromtimestamp(listed["next_at"], UTC).second == 0
        croniter_calls.clear()
        assert await Scheduler(store, clock=clock).tick() == []  # caught up: nothing due until the next minute
        assert len(await store.list_runs()) == 1
