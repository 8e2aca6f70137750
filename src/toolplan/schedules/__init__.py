"""Schedules: plans that run later (at a time, after a delay, every interval, on a cron expression).

```python
from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.store import open_store

async with open_store("sqlite:///runs.db") as store:
    schedules = ScheduleTools(store, tools)        # schedule_create/list/update/delete, for a model or a plan
    await schedules.schedule_create("digest", plan, "0 9 * * 1-5", timezone="Europe/Paris")
    await Scheduler(store).tick()                  # fire what is due: queued durable runs, once each
```

Cron expressions need ``pip install "toolplan[schedules]"`` (croniter). See docs/schedules.md.
"""

from ._scheduler import Scheduler as Scheduler
from ._store import Firing as Firing
from ._tools import ScheduleTools as ScheduleTools

__all__ = (
    "Firing",
    "ScheduleTools",
    "Scheduler",
)
