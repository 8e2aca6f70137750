from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest


@pytest.mark.slow
def test_the_spend_example_runs(run_example: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = run_example("examples/spend/spend_caps.py")
    assert done.stdout.splitlines() == [
        "stopped at max_total_tokens after 3 model requests",
        "tokens: 3600 in (3000 cached), 240 out",
        "money: 0.007650",
        "partial result: usage_limit, last text 'Searching, turn 3.'",
        "usage_limit: 1 requests, money 0.002550 (" + done.stdout.splitlines()[-1].split("(", 1)[1],
    ]
    assert "max_money" in done.stdout.splitlines()[-1]
