"""What the schedule tests share (a module of its own: conftest names clash across folders)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from toolplan import tool
from toolplan.schedules import Firing
from toolplan.store import RunInfo, RunSummary, Store, open_store, resume

__all__ = ("T0", "Clock", "add", "one_finished_run", "run_the_queued_run", "serving")

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@contextlib.contextmanager
def serving(cwd: Path, *args: str, **env: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``toolplan serve ARGS --port PORT`` started in ``cwd`` (its stderr in ``serve.log``), stopped after.

    Yields the process and its port (a free one on 127.0.0.1).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "toolplan", "serve", *args, "--port", str(port)]
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    with (cwd / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=full_env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield process, port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


async def one_finished_run(url: str, process: subprocess.Popen[bytes], log: Path) -> tuple[RunSummary, RunInfo]:
    """The store's one run once it has succeeded (up to a minute), and what is stored of it."""
    status = ""
    async with open_store(url) as store:
        for _ in range(600):
            runs = await store.list_runs()
            status = runs[0].status if runs else ""
            if status == "succeeded" or process.poll() is not None:
                break
            await asyncio.sleep(0.1)
        if status != "succeeded":
            text = await asyncio.to_thread(log.read_text, errors="replace")
            raise AssertionError(f"the run did not succeed ({status or 'no run'}): {text[-2000:]}")
        (run,) = await store.list_runs()
        return run, await store.get_run(run.run_id)


async def run_the_queued_run(store: Store, firing: Firing, schedule_id: str) -> str:
    """Check that ``firing`` queued its run (child of the schedule), claim it and run it (``add`` gives 42)."""
    assert firing.run_id is not None
    info = await store.get_run(firing.run_id)
    assert info.summary.status == "queued" and info.summary.parent_id == schedule_id
    run_id = await store.claim_next()
    assert run_id == firing.run_id
    result = await resume(run_id, [add], store=store)
    assert result.ok and result.steps["s"].output == 42
    stored = await store.get_run(run_id)
    assert stored.summary.status == "succeeded" and stored.result.steps["s"].output == 42
    return run_id
