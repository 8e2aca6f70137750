"""The planner service: questions to validated plans, stored and run by id, behind API keys.

```python
from toolplan.service import Service, create_app
from toolplan.store import open_store

store = open_store("sqlite:///service.db")
app = create_app(Service(store, tools, model="openai:gpt-4o-mini"))   # uvicorn app; or `toolplan serve`
```

Needs ``pip install "toolplan[service]"``. See docs/service.md for the API (GraphQL:
docs/service-graphql.md).

The names below are imported when first used, not when the package is: the CLI's store-only commands
(``toolplan keys ...``, ``toolplan runs ...``) reach the service's store through ``_internal`` without
loading the web app (FastAPI, GraphQL, uvicorn). The extra is checked at that first use.
"""

import importlib as _importlib
import typing as _typing

from .._optional import require_optional as _require_optional

if _typing.TYPE_CHECKING:
    from ._app import create_app as create_app
    from ._config import ServiceConfig as ServiceConfig
    from ._core import Service as Service
    from ._serve import serve as serve

__all__ = ("Service", "ServiceConfig", "create_app", "serve")

# Each public name and the private module that defines it.
_WHERE = {"Service": "._core", "ServiceConfig": "._config", "create_app": "._app", "serve": "._serve"}


def __getattr__(name: str) -> _typing.Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _require_optional("toolplan.service", "service", "fastapi", "sse_starlette", "strawberry", "uvicorn")
    value = getattr(_importlib.import_module(where, __name__), name)
    globals()[name] = value  # once: later look-ups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
