"""Built-in toolsets: HTTP, files and data, each opt-in and each a documented multi-function `Tool`.

```python
from toolplan.tools.builtin import DataTools, FileTools, HttpTools

tools = [
    FileTools("workspace"),                        # read_file, write_file, list_files, search_files
    HttpTools(allow_hosts=["api.example.com"]),    # http_get, http_post (nothing allowed by default)
    DataTools(),                                   # json_query, json_transform, csv_to_json, json_to_csv
]
```

The shell and Python toolsets run in the code-mode sandbox and live there: `toolplan.sandbox.ShellTools`
and `toolplan.sandbox.PythonTool`. `HttpTools` and `DataTools` need ``pip install "toolplan[builtin]"``;
importing this package does not.
"""

from ._data import DataTools as DataTools
from ._fetch import HttpPolicy as HttpPolicy
from ._fetch import HttpResponse as HttpResponse
from ._files import FileTools as FileTools
from ._http import HttpTools as HttpTools
from ._toolset import Toolset as Toolset

__all__ = (
    "DataTools",
    "FileTools",
    "HttpPolicy",
    "HttpResponse",
    "HttpTools",
    "Toolset",
)
