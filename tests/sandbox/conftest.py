from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sandbox_fakes import HAS_MONTY, FakeTools

from toolplan.sandbox import CodeLimits, CodeRunner, MontyRunner, SubprocessRunner


@pytest.fixture
def tools() -> FakeTools:
    return FakeTools()


def _runners() -> Iterator[Any]:
    yield pytest.param(SubprocessRunner(), id="subprocess")
    yield pytest.param(
        MontyRunner(), id="monty", marks=pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
    )


@pytest.fixture(params=list(_runners()))
def runner(request: pytest.FixtureRequest) -> CodeRunner:
    r: CodeRunner = request.param
    return r


SMALL = CodeLimits(wall_time=20)
