"""Fakes and switches for testing code built on toolplan: no network, deterministic.

- `TestModel`, `FunctionModel`, `ScriptedModel`: models that answer without a provider and record
  what they were sent.
- `forbid_model_requests()`: real models fail before any network I/O.
- `disable_retry_backoff()`: retries happen without waiting.
- `local_llama_server()`: a real tiny model (llama.cpp server) for end-to-end tests.
- `FakeProvider`: a real HTTP server that answers like a model provider (OpenAI, Anthropic) from
  `Canned` answers (`openai_tool_call`, `openai_text`, `openai_sse`, `anthropic_sse`), so a real
  provider client, or a service started with ``--model openai:NAME``, can be tested end to end.
- `HashEmbeddings`: a deterministic embedding provider (hashed words) for knowledge-base tests.
"""

from ._embeddings import HashEmbeddings as HashEmbeddings
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
from ._provider import Canned as Canned
from ._provider import FakeProvider as FakeProvider
from ._provider import ProviderRequest as ProviderRequest
from ._provider import anthropic_sse as anthropic_sse
from ._provider import openai_sse as openai_sse
from ._provider import openai_text as openai_text
from ._provider import openai_tool_call as openai_tool_call
from ._schema_args import schema_value as schema_value

__all__ = (
    "Canned",
    "FakeProvider",
    "FunctionInfo",
    "FunctionModel",
    "HashEmbeddings",
    "LocalLlamaServer",
    "ProviderRequest",
    "RecordedRequest",
    "ScriptedModel",
    "TestModel",
    "ToolCallChunk",
    "anthropic_sse",
    "disable_retry_backoff",
    "find_smollm2_gguf",
    "forbid_model_requests",
    "local_llama_server",
    "openai_sse",
    "openai_text",
    "openai_tool_call",
    "schema_value",
)
