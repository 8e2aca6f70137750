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

import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any

from ._records import RunInfo as RunInfo
from ._records import RunSummary as RunSummary
from ._records import StoredEvent as StoredEvent
from ._records import new_run_id as new_run_id
from ._resume import resume as resume
from ._store import Store as Store
from ._store import open_store as open_store
from ._windows import StoreWindow as StoreWindow

__all__ = (
    "RunInfo",
    "RunSummary",
    "Store",
    "StoreWindow",
    "StoredEvent",
    "new_run_id",
    "open_store",
    "resume",
)


def __getattr__(name: str) -> _Any:
    """The planner's records, once here: deprecated aliases of ``toolplan.planner``'s, for one release."""
    if name in ("PlanVersion", "RequestInfo"):
        _warnings.warn(
            f"toolplan.store.{name} is deprecated and will be removed in the next release: "
            f"use toolplan.planner.{name}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_importlib.import_module("toolplan.planner"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
