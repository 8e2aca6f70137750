"""Schedule a plan, let the clock pass its time, fire it and run it: python examples/schedules/schedule_and_fire.py"""

import asyncio
import tempfile
import time
from pathlib import Path

from toolplan import tool
from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.store import open_store, resume


@tool(read_only=True)
def count_orders(day: str) -> int:
    """Count the orders of a day."""
    return 42


PLAN = {"steps": [{"id": "n", "tool": "count_orders", "arguments": {"day": "today"}}]}


class Clock:
    """Wall-clock seconds that this example moves by hand (the scheduler takes any clock)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def main() -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{Path(tmp) / 'runs.db'}") as store:
            tools = ScheduleTools(store, [count_orders], clock=clock)
            made = await tools.schedule_create("daily count", PLAN, "every 1h")
            print("scheduled", made["schedule_id"], "every", made["spec"], "s")

            scheduler = Scheduler(store, clock=clock)
            print("due now:", await scheduler.tick())  # [] : nothing is due yet
            clock.now += 3600  # an hour later
            (firing,) = await scheduler.tick()  # one queued durable run, whose parent is the schedule
            print("fired", firing.run_id)

            run_id = await store.claim_next()  # what `toolplan runs work` or the service does
            assert run_id == firing.run_id
            result = await resume(run_id, [count_orders], store=store)
            print("run", result.status, "output", result.steps["n"].output)  # run succeeded output 42


asyncio.run(main())
