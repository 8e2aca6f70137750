"""The planner service: questions to validated plans, stored and run by id, behind API keys.

```python
from toolplan.service import Service, create_app
from toolplan.store import open_store

store = open_store("sqlite:///service.db")
app = create_app(Service(store, tools, model="openai:gpt-4o-mini"))   # uvicorn app; or `toolplan serve`
```

Needs ``pip install "toolplan[service]"``. See docs/service.md for the API (GraphQL:
docs/service-graphql.md).
"""

from .._errors import OptionalDependencyError as _OptionalDependencyError

try:
    import fastapi as _fastapi  # noqa: F401
    import sse_starlette as _sse  # noqa: F401
    import strawberry as _strawberry  # noqa: F401
    import uvicorn as _uvicorn  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise _OptionalDependencyError("toolplan.service", "service", package=_exc.name) from _exc

from ._app import create_app as create_app
from ._config import ServiceConfig as ServiceConfig
from ._core import Service as Service
from ._serve import serve as serve

__all__ = ("Service", "ServiceConfig", "create_app", "serve")
