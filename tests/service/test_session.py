"""The README's curl session is examples/service/session.sh, and it runs: plan, execute, follow, read."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "service" / "session.sh"


def test_the_readme_shows_the_session_script() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert SCRIPT.read_text(encoding="utf-8") in readme


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("curl") is None, reason="needs curl and jq")
def test_the_session_runs(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    with socket.socket() as sock:  # the README's port 8000 may be taken here: the same script on a free one
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "session.sh"
    script.write_text(SCRIPT.read_text(encoding="utf-8").replace("8000", str(port)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        ["bash", "-e", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "event: plan_finished" in out and out.count("event: step_finished") == 3
    assert '{"status":"succeeded","outputs":{"cmp":"second is warmer"}}' in out
    assert out.rstrip().endswith('"no_model"')
