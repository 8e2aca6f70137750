"""The planner: a question and a tool catalogue in, a validated plan out (with at most one repair).

```python
from toolplan.planner import Planner

draft = await Planner("openai:gpt-4o-mini", tools).plan("Compare the weather in Oslo and Rome")
if draft.valid:
    result = await execute_plan(draft.plan, tools)
```
"""

from ._planner import SUBMIT_TOOL_NAME as SUBMIT_TOOL_NAME
from ._planner import OutputDialect as OutputDialect
from ._planner import PlanDraft as PlanDraft
from ._planner import Planner as Planner
from ._planner import new_id as new_id
from ._schema import plan_schema as plan_schema
from ._store import PlanVersion as PlanVersion
from ._store import RequestInfo as RequestInfo
from ._store import get_request as get_request

__all__ = (
    "SUBMIT_TOOL_NAME",
    "OutputDialect",
    "PlanDraft",
    "PlanVersion",
    "Planner",
    "RequestInfo",
    "get_request",
    "new_id",
    "plan_schema",
)
