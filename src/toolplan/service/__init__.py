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

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._optional import require_optional as _require_optional

_require_optional("toolplan.service", "service", "fastapi", "sse_starlette", "strawberry", "uvicorn")

from ._app import create_app as create_app
from ._config import ServiceConfig as ServiceConfig
from ._core import Service as Service
from ._serve import serve as serve

__all__ = ("Service", "ServiceConfig", "create_app", "serve")
