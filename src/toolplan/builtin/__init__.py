"""Built-in toolsets: files, HTTP, data, web search, shell and Python; each opt-in, each a multi-function `Tool`.

```python
from toolplan.builtin import DataTools, FileTools, HttpTools, PythonTool, SearxNG, ShellTools, WebSearchTools

tools = [
    FileTools("workspace"),                        # read_file, write_file, list_files, search_files
    HttpTools(allow_hosts=["api.example.com"]),    # http_get, http_post (nothing allowed by default)
    DataTools(),                                   # json_query, json_transform, csv_to_json, json_to_csv
    WebSearchTools(SearxNG("http://127.0.0.1:8888")),  # web_search (or BraveSearch(api_key))
    ShellTools("workspace"),                       # run_shell, confined (Linux x86-64 with Landlock)
    PythonTool(),                                  # run_python, in the code-mode sandbox
]
```

`OpenAPIToolset(spec)` offers one tool per operation of an OpenAPI 3.0/3.1 document (docs/openapi.md).
`ShellTools` and `PythonTool` run in the code-mode sandbox's confinement (`toolplan.sandbox`).
`HttpTools`, `OpenAPIToolset` and `DataTools` need ``pip install "toolplan[builtin]"``, `WebSearchTools`
``pip install "toolplan[websearch]"``; importing this package does not.
"""

from ._data import DataTools as DataTools
from ._fetch import HttpPolicy as HttpPolicy
from ._fetch import HttpResponse as HttpResponse
from ._files import FileTools as FileTools
from ._http import HttpTools as HttpTools
from ._openapi import APIKeyAuth as APIKeyAuth
from ._openapi import BasicAuth as BasicAuth
from ._openapi import BearerAuth as BearerAuth
from ._openapi import OpenAPIToolset as OpenAPIToolset
from ._python import PythonTool as PythonTool
from ._shell import ShellLimits as ShellLimits
from ._shell import ShellResult as ShellResult
from ._shell import ShellTools as ShellTools
from ._shell import shell_confinement_problem as shell_confinement_problem
from ._websearch import BraveSearch as BraveSearch
from ._websearch import SearchHit as SearchHit
from ._websearch import SearchProvider as SearchProvider
from ._websearch import SearchProviderError as SearchProviderError
from ._websearch import SearxNG as SearxNG
from ._websearch import WebSearchTools as WebSearchTools
from ._websearch import search_provider_from_env as search_provider_from_env

__all__ = (
    "APIKeyAuth",
    "BasicAuth",
    "BearerAuth",
    "BraveSearch",
    "DataTools",
    "FileTools",
    "HttpPolicy",
    "HttpResponse",
    "HttpTools",
    "OpenAPIToolset",
    "PythonTool",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxNG",
    "ShellLimits",
    "ShellResult",
    "ShellTools",
    "WebSearchTools",
    "search_provider_from_env",
    "shell_confinement_problem",
)
