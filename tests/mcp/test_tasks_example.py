"""examples/mcp/long_plan_task.py runs and prints what it promises."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest


@pytest.mark.slow
def test_the_example_runs(run_example: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = run_example("examples/mcp/long_plan_task.py")
    assert done.stdout.splitlines() == [
        "task started: working",
        "task completed: 4/4 steps done",
        "outputs: {'sum': 358}",
    ]
