"""Run a durable plan, kill its process with SIGKILL while it pays, then resume it.

    python examples/durable/crash_and_resume.py

The first ``toolplan run`` dies right after ``charge_card`` returned and before its result was
committed (the fault point ``after_call``). Running the same command again with the printed run id
reuses the flight and the seat hold, and does not charge again: toolplan cannot know whether the
charge went through, so the step ends ``unknown_outcome`` and names the idempotency key to check.
With ``--rerun-unknown`` the charge is sent again with the same key, which the provider de-duplicates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def toolplan(*args: str, fault: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLPLAN_FAULTS": fault}
    command = [sys.executable, "-m", "toolplan", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=120)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="toolplan-durable-"))
    os.environ["PAYMENTS_FILE"] = str(work / "payments.json")
    db = f"sqlite:///{work / 'runs.db'}"
    run = ["run", str(HERE / "plan.json"), "--tools", str(HERE / "tools.py"), "--db", db, "--run-id", "trip-1"]

    first = toolplan(*run, fault="after_call=3")  # the 3rd call is charge_card: die once it has returned
    print(f"first attempt: killed={first.returncode == -9}")
    print(toolplan("runs", "show", "trip-1", "--db", db).stdout)

    second = toolplan(*run)  # the same command: it resumes
    print(second.stdout)
    charges = json.loads((work / "payments.json").read_text())
    print(f"charges made: {len(charges)} (key {next(iter(charges))})")

    third = toolplan(*run, "--rerun-unknown")  # we checked: call it again, with the same key
    print(third.stdout)
    charges = json.loads((work / "payments.json").read_text())
    print(f"charges made: {len(charges)}")


if __name__ == "__main__":
    main()
