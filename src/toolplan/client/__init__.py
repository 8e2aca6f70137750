"""A Python client of the planner service (``toolplan serve``), on httpx: `Client` and `AsyncClient`.

```python
from toolplan.client import Client

with Client("http://127.0.0.1:8000", api_key="tpk_...") as client:
    stored = client.create_plan({"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]})
    execution = client.execute(stored.plan_id)
    for event in client.events(execution.execution_id):  # live; reconnects from the last event seen
        print(event.seq, event.type, event.step_id)
    print(client.get_execution(execution.execution_id).outputs)  # {'a': 3}
```

Errors the service answers raise `toolplan.ServiceError` with its code. Needs
``pip install "toolplan[client]"`` (httpx and httpx-sse; not the service's FastAPI). See docs/client.md.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._optional import require_optional as _require_optional

_require_optional("toolplan.client", "client", "httpx", "httpx_sse")

from .._errors import ServiceError as ServiceError
from ._async import AsyncClient as AsyncClient
from ._calls import RetryPolicy as RetryPolicy
from ._sync import Client as Client
from ._types import Event as Event
from ._types import Execution as Execution
from ._types import ExecutionSummary as ExecutionSummary
from ._types import Planned as Planned
from ._types import PlanSummary as PlanSummary
from ._types import PlanVersion as PlanVersion
from ._types import Request as Request
from ._types import RequestSummary as RequestSummary
from ._types import StoredPlan as StoredPlan

__all__ = (
    "AsyncClient",
    "Client",
    "Event",
    "Execution",
    "ExecutionSummary",
    "PlanSummary",
    "PlanVersion",
    "Planned",
    "Request",
    "RequestSummary",
    "RetryPolicy",
    "ServiceError",
    "StoredPlan",
)
