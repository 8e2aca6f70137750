"""examples/tool_search/large_catalogue.py runs and prints what it promises."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest


@pytest.mark.slow
def test_the_example_searches_then_plans(run_example: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = run_example("examples/tool_search/large_catalogue.py")
    assert "catalogue: 1020 tools, 1020 deferred" in done.stdout
    assert "first request lists: ['execute_tool_plan', 'search_tools']" in done.stdout
    assert '"tool": "billing_approve_refund"' in done.stdout and '"tool": "billing_notify_refund"' in done.stdout
    assert '"status":"succeeded"' in done.stdout
