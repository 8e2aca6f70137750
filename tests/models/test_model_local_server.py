"""``local:NAME``: the model that starts its own llama.cpp server, and the server's tie to its parent.

The fast tests check names, settings and the errors of a missing extra without starting anything.
The slow ones start the real server (SmolLM2-135M): one checks that a parent killed by SIGTERM
leaves no server behind, one that ``toolplan serve --model local:smollm2`` plans a question with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolplan import UserError
from toolplan.cli import app
from toolplan.models import LocalModel, ModelSettings, infer_model
from toolplan.models._local import DEFAULT_LOCAL_CONTEXT, LOCAL_CONTEXT_ENV, find_smollm2_gguf

REPO = Path(__file__).resolve().parents[2]
INSTALL_LINE = 'pip install "toolplan[local]"'


@pytest.fixture(autouse=True)
def default_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOCAL_CONTEXT_ENV, raising=False)


@pytest.fixture
def without_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if ``toolplan[local]`` were not installed: ``llama_cpp`` cannot be found."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name.split(".")[0] == "llama_cpp" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_local_smollm2_is_a_local_model_that_starts_nothing_yet() -> None:
    model = infer_model("local:smollm2")
    assert isinstance(model, LocalModel)
    assert (model.name, model.provider, model.n_ctx) == ("smollm2-135m-instruct", "llama.cpp", DEFAULT_LOCAL_CONTEXT)
    assert model.pid is None and model.base_url is None
    assert model.settings.max_tokens == 1024 and model.settings.temperature == 0.0


def test_the_context_fits_a_planner_repair_round() -> None:
    # Measured: the planner's first request is about 1,250 tokens, its repair round about 4,000
    # plus the answer's 1,024; llama.cpp's own default (2,048) overflows on the repair.
    model = LocalModel()
    assert model.n_ctx >= 4000 + (model.settings.max_tokens or 0)


def test_the_context_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LocalModel(n_ctx=4096).n_ctx == 4096
    monkeypatch.setenv(LOCAL_CONTEXT_ENV, "16384")
    assert LocalModel().n_ctx == 16384
    monkeypatch.setenv(LOCAL_CONTEXT_ENV, "lots")
    with pytest.raises(UserError, match=f"{LOCAL_CONTEXT_ENV}='lots': set it to a number of tokens"):
        LocalModel()
    with pytest.raises(UserError, match="at least 512 tokens"):
        LocalModel(n_ctx=100)


def test_settings_merge_over_the_local_defaults() -> None:
    model = LocalModel(settings=ModelSettings(max_tokens=64))
    assert model.settings.max_tokens == 64
    assert model.settings.extra_body == {"repeat_penalty": 1.0}


def test_a_gguf_path_is_served_under_its_stem(tmp_path: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:  # found, not imported: the extra is checked first
        pytest.skip(f"llama-cpp-python is not installed: {INSTALL_LINE}")
    model = infer_model(f"local:{tmp_path / 'tiny-model.gguf'}")
    assert isinstance(model, LocalModel) and model.name == "tiny-model"
    with pytest.raises(UserError, match=r"No model file at .*tiny-model\.gguf"):
        model.check_credentials()


def test_an_unknown_local_name_says_what_works() -> None:
    with pytest.raises(UserError, match=r"Unknown local model 'gpt5': use local:smollm2 .* or local:PATH"):
        infer_model("local:gpt5")


def test_without_the_extra_the_error_names_the_install_line(without_llama_cpp: None) -> None:
    model = infer_model("local:smollm2")  # creating it needs nothing
    with pytest.raises(ImportError, match=r"toolplan\[local\]"):
        model.check_credentials()


def test_the_models_the_service_recommends_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi")
    import inspect

    from toolplan.service._core import Service

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # "with OPENAI_API_KEY set", as the message says
    named = set(re.findall(r"--model ([a-z]+:[\w.-]+)", inspect.getsource(Service.need_planner))) - {"provider:name"}
    assert "local:smollm2" in named
    for spec in named:
        infer_model(spec).check_credentials() if spec.startswith("openai:") else infer_model(spec)


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_the_cli_refuses_a_local_model_without_the_extra(command: str, without_llama_cpp: None, tmp_path: Path) -> None:
    tools = REPO / "examples" / "service" / "tools.py"
    args = ["serve", "--tools", str(tools), "--db", str(tmp_path / "s.db")] if command == "serve" else ["demo"]
    result = CliRunner().invoke(app, [*args, "--model", "local:smollm2"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert INSTALL_LINE in result.stderr and "Traceback" not in result.stderr
    assert "toolplan service on" not in result.stdout


# -- the real server ----------------------------------------------------------------------------


def _need_the_local_model() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(f"llama-cpp-python is not installed: {INSTALL_LINE}")
    try:
        find_smollm2_gguf()
    except UserError as exc:
        pytest.skip(str(exc))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie (not yet reaped by its parent, which may be gone too) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _wait_until(condition: object, what: str, timeout: float) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout} s")
        time.sleep(0.1)  # polling another process's state: there is no event to wait on


PARENT = textwrap.dedent(
    """
    import sys, threading
    from toolplan.testing import local_llama_server

    with local_llama_server() as server:
        print(server.pid, flush=True)
        threading.Event().wait()  # until the test kills this process
    """
)


@pytest.mark.slow
@pytest.mark.local_model
def test_the_server_ends_when_its_parent_gets_sigterm() -> None:
    _need_the_local_model()
    with subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as parent:
        try:
            assert parent.stdout is not None and parent.stderr is not None
            line = parent.stdout.readline()  # the server's pid, once it answers
            assert line.strip().isdigit(), parent.stderr.read()
            server_pid = int(line)
            assert not _gone(server_pid)
            parent.send_signal(signal.SIGTERM)  # no handler: it dies without running its finally blocks
            assert parent.wait(timeout=30) == -signal.SIGTERM
            _wait_until(lambda: _gone(server_pid), "the llama.cpp server did not end after its parent's SIGTERM", 30)
        finally:
            if parent.poll() is None:
                parent.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().split(")")[-1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


@pytest.fixture
def local_service(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``toolplan serve --model local:smollm2`` on a free port, with one API key."""
    pytest.importorskip("fastapi")
    _need_the_local_model()
    (tmp_path / "keys.txt").write_text("a-test-key\n", encoding="utf-8")
    port = _free_port()
    command = [
        sys.executable, "-m", "toolplan.cli", "serve",
        "--tools", str(REPO / "examples" / "service" / "tools.py"),
        "--db", str(tmp_path / "s.db"), "--api-key-file", str(tmp_path / "keys.txt"),
        "--port", str(port), "--model", "local:smollm2", "--no-scheduler",
    ]  # fmt: skip
    with (tmp_path / "serve.log").open("w+") as log:
        service = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
        try:
            url = f"http://127.0.0.1:{port}"

            def up() -> bool:
                if service.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"toolplan serve exited: {log.read()}")
                try:
                    with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                        return True
                except OSError:
                    return False

            _wait_until(up, "toolplan serve did not answer /healthz", 180)
            yield url, service
        finally:
            if service.poll() is None:
                service.kill()
                service.wait()


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.timeout(900)
def test_serve_with_the_local_model_plans_a_question_and_stops_its_server(
    local_service: tuple[str, subprocess.Popen[str]],
) -> None:
    url, service = local_service
    [server_pid] = [
        pid for pid in _children(service.pid) if "llama_cpp.server" in Path(f"/proc/{pid}/cmdline").read_text()
    ]
    request = urllib.request.Request(
        f"{url}/v1/requests",
        data=json.dumps({"query": "Is Oslo warmer than Rome?"}).encode(),
        headers={"X-API-Key": "a-test-key", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            status, body = response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        status, body = exc.code, json.loads(exc.read())
    # The tiny model's plan may be invalid (422 plan_invalid, with the draft); what must not happen
    # is a failed model call (502): its prompt and one repair fit the server's context.
    assert status in (201, 422), body
    draft = body if status == 201 else body["details"]
    assert draft["usage"]["requests"] == (2 if draft["repaired"] else 1)
    if draft["repaired"]:
        assert draft["usage"]["input_tokens"] > 2048  # more than llama.cpp's default context holds
    service.send_signal(signal.SIGTERM)
    assert service.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal
    _wait_until(lambda: _gone(server_pid), "the llama.cpp server outlived toolplan serve", 30)
