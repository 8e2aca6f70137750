"""Fakes and switches for testing code built on toolplan: no network, deterministic.

- `TestModel`, `FunctionModel`, `ScriptedModel`: models that answer without a provider and record
  what they were sent.
- `forbid_model_requests()`: real models fail before any network I/O.
- `disable_retry_backoff()`: retries happen without waiting.
- `local_llama_server()`: a real tiny model (llama.cpp server) for end-to-end tests.
"""

from ._local_llama import LocalLlamaServer as LocalLlamaServer
from ._local_llama import find_smollm2_gguf as find_smollm2_gguf
from ._local_llama import local_llama_server as local_llama_server
from ._models import FunctionInfo as FunctionInfo
from ._models import FunctionModel as FunctionModel
from ._models import RecordedRequest as RecordedRequest
from ._models import ScriptedModel as ScriptedModel
from ._models import TestModel as TestModel
from ._models import ToolCallChunk as ToolCallChunk
from ._models import disable_retry_backoff as disable_retry_backoff
from ._models import forbid_model_requests as forbid_model_requests
from ._schema_args import schema_value as schema_value

__all__ = (
    "FunctionInfo",
    "FunctionModel",
    "LocalLlamaServer",
    "RecordedRequest",
    "ScriptedModel",
    "TestModel",
    "ToolCallChunk",
    "disable_retry_backoff",
    "find_smollm2_gguf",
    "forbid_model_requests",
    "local_llama_server",
    "schema_value",
)
