from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, fake_provider

from toolplan.testing import LocalLlamaServer, disable_retry_backoff, find_smollm2_gguf, local_llama_server


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with fake_provider() as server:
        yield server


@pytest.fixture(autouse=True)
def no_backoff() -> Iterator[None]:
    """Retries happen at once (stamina's test mode), with each model's own number of attempts."""
    with disable_retry_backoff():
        yield


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LocalLlamaServer]:
    """SmolLM2-135M-Instruct behind `python -m llama_cpp.server` on a free loopback port."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama-cpp-python is not installed: pip install "toolplan[local]"')
    try:
        find_smollm2_gguf()
    except Exception as exc:
        pytest.skip(str(exc))
    with local_llama_server() as server:
        yield server
