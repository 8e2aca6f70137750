"""Built-in toolsets: HTTP, files, data and web search, each opt-in and each a documented multi-function `Tool`.

```python
from toolplan.tools.builtin import DataTools, FileTools, HttpTools, SearxNG, WebSearchTools

tools = [
    FileTools("workspace"),                        # read_file, write_file, list_files, search_files
    HttpTools(allow_hosts=["api.example.com"]),    # http_get, http_post (nothing allowed by default)
    DataTools(),                                   # json_query, json_transform, csv_to_json, json_to_csv
    WebSearchTools(SearxNG("http://127.0.0.1:8888")),  # web_search (or BraveSearch(api_key))
]
```

The shell and Python toolsets run in the code-mode sandbox and live there: `toolplan.sandbox.ShellTools`
and `toolplan.sandbox.PythonTool`. `HttpTools` and `DataTools` need ``pip install "toolplan[builtin]"``,
`WebSearchTools` ``pip install "toolplan[websearch]"``; importing this package does not.
"""

from ._data import DataTools as DataTools
from ._fetch import HttpPolicy as HttpPolicy
from ._fetch import HttpResponse as HttpResponse
from ._files import FileTools as FileTools
from ._http import HttpTools as HttpTools
from ._toolset import Toolset as Toolset
from ._websearch import BraveSearch as BraveSearch
from ._websearch import SearchHit as SearchHit
from ._websearch import SearchProvider as SearchProvider
from ._websearch import SearchProviderError as SearchProviderError
from ._websearch import SearxNG as SearxNG
from ._websearch import WebSearchTools as WebSearchTools
from ._websearch import search_provider_from_env as search_provider_from_env

__all__ = (
    "BraveSearch",
    "DataTools",
    "FileTools",
    "HttpPolicy",
    "HttpResponse",
    "HttpTools",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxNG",
    "Toolset",
    "WebSearchTools",
    "search_provider_from_env",
)
