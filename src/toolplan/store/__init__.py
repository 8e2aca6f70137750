"""Durable runs: plans, executions, step runs and events in SQLite (default) or PostgreSQL.

```python
from toolplan import execute_plan
from toolplan.store import open_store, resume

async with open_store("sqlite:///runs.db") as store:
    result = await execute_plan(plan, tools, store=store)   # every step committed as it runs
    ...
    result = await resume(result.run_id, tools, store=store)  # after a crash: nothing done twice
```

Needs SQLAlchemy (a dependency of toolplan); PostgreSQL needs ``pip install "toolplan[postgres]"``.
See docs/durable.md for the guarantee per kind of tool.
"""

from ._resume import resume as resume
from ._sql import PlanVersion as PlanVersion
from ._sql import RequestInfo as RequestInfo
from ._sql import RunInfo as RunInfo
from ._sql import RunSummary as RunSummary
from ._sql import Store as Store
from ._sql import StoredEvent as StoredEvent
from ._sql import new_run_id as new_run_id
from ._sql import open_store as open_store
from ._windows import StoreWindow as StoreWindow

__all__ = (
    "PlanVersion",
    "RequestInfo",
    "RunInfo",
    "RunSummary",
    "Store",
    "StoreWindow",
    "StoredEvent",
    "new_run_id",
    "open_store",
    "resume",
)
