"""examples/approval/approve_plan.py does what docs/approval.md says it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import toolplan

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(toolplan.__file__).resolve().parents[1]


def test_the_approval_example() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "approval" / "approve_plan.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "asked: rm calls delete_files" in out and "dependents ['tell']" in out
    assert "1. succeeded: posted" in out
    assert "2. pending_approval, waiting: ['rm'], calls so far: ['find_old_files']" in out
    assert "resumed: failed; rm rejected, tell skipped" in out
    assert "keep the 2020 logs" in out
    assert "3. succeeded: delete_files ['/var/log/app/2019.log']" in out


def test_the_approve_ahead_example(run_example: Any) -> None:
    out = run_example("examples/approval/approve_ahead.py").stdout
    assert "1. pay ready=True arguments={'invoice': 'inv-bob', 'amount': 120}" in out
    assert "1. mail ready=False arguments={'to': 'bob@example.com', 'text': '{{pay}}'}" in out
    assert "2. succeeded: ['find_invoice', 'charge inv-bob 120', 'send_receipt bob@example.com']" in out
    assert "3. asked 1 time(s) about ['pay', 'mail']; mail rejected" in out
    assert "4. streamed plan waits for ['pay']" in out and "5. completed: Bob is charged." in out
    assert "6. code asks about [('charge', {'invoice': 'inv-ann', 'amount': 5})]" in out
    assert "7. Ann is charged. charge inv-ann 5" in out
