from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from toolplan.testing import LocalLlamaServer, find_smollm2_gguf, local_llama_server


def _unavailable(reason: str) -> None:
    # CI installs the local model (scripts/test.sh): there a missing piece is a failure, not a skip.
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the local-model tests)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LocalLlamaServer]:
    """SmolLM2-135M-Instruct behind `python -m llama_cpp.server` on a free loopback port."""
    if importlib.util.find_spec("llama_cpp") is None:
        _unavailable('llama-cpp-python is not installed: pip install "toolplan[local]"')
    try:
        find_smollm2_gguf()
    except Exception as exc:
        _unavailable(str(exc))
    with local_llama_server() as server:
        yield server
