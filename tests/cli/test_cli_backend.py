"""``--backend ray:ADDRESS`` with no cluster there: one error line, soon; no Ray cluster is started."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from cli_support import Calls, Cli, WritePlan

pytestmark = pytest.mark.slow  # each command imports Ray (seconds)

PLAN = [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_address_where_nothing_listens_is_one_error_line(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    pytest.importorskip("ray")
    port = _unused_port()
    started = time.monotonic()
    done = cli("run", str(write_plan(PLAN)), "--tools", str(tools_file), "--backend", f"ray:127.0.0.1:{port}")
    assert done.code == 2, done.stderr
    assert time.monotonic() - started < 45  # Ray alone retries for minutes
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert line.startswith(f"Error: --backend ray:127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port}")
    assert "ray start --head" in line and "Traceback" not in done.stderr
    assert tool_calls() == []


def test_auto_with_no_cluster_is_one_error_line(
    cli: Cli,
    tools_file: Path,
    write_plan: WritePlan,
    tool_calls: Calls,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    from ray._private.services import find_gcs_addresses

    running = find_gcs_addresses()  # type: ignore[no-untyped-call]
    if running:  # a cluster of another process on this machine: ray:auto would join it
        pytest.skip("a Ray cluster runs on this machine")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no address file of an earlier cluster
    done = cli("run", str(write_plan(PLAN)), "--tools", str(tools_file), "--backend", "ray:auto")
    assert done.code == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert line.startswith("Error: --backend ray:auto: ") and "ray start --head" in line, line
    assert tool_calls() == []
