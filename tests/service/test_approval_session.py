"""examples/service/approval.sh runs: an execution waits, a key without the permission is refused, another approves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "service" / "approval.sh"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("curl") is None, reason="needs curl and jq")
def test_the_approval_session_runs(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    with socket.socket() as sock:  # port 8000 may be taken here: the same script on a free one
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "approval.sh"
    script.write_text(SCRIPT.read_text(encoding="utf-8").replace("8000", str(port)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        ["bash", "-e", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith('{"status":"pending_approval","waiting":[{"step_id":"cmp","tool":"compare"'), lines
    assert lines[1:3] == ['"forbidden"', '"queued"'], lines
    assert lines[3] == '{"status":"succeeded","outputs":{"cmp":"second is warmer"}}', lines
