"""Every ``$ toolplan ...`` example of docs/live-view.md runs (in a copy of examples/quickstart), with
the output the page shows; ``--ui`` examples run with ``--ui-keep 0`` so that they end with the run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ui_support import REPO

import toolplan

DOC = REPO / "docs" / "live-view.md"
SRC = Path(toolplan.__file__).resolve().parents[1]


def examples() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif line.strip():
                found[-1][1].append(line)
    return found


@pytest.mark.slow
def test_the_pages_commands_run_and_print_what_it_shows(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "quickstart", tmp_path / "examples" / "quickstart")
    bindir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "PYTHONIOENCODING": "utf-8"}
    # The toolplan these tests import (a relative PYTHONPATH would not survive cwd=tmp_path).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    ran = []
    for command, expected in examples():
        if " --ui" in command:
            command += " --ui-keep 0"
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              encoding="utf-8", timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        lines = (done.stdout + done.stderr).splitlines()
        for line in expected:
            if "--ui-keep" in line and command.endswith("--ui-keep 0"):
                continue  # with --ui-keep 0 the page stops with the run
            pattern = re.compile(".*".join(re.escape(part) for part in line.split("…")))
            assert any(pattern.fullmatch(out) for out in lines), (command, line, lines)
        ran.append(command.split()[1])
    assert ran.count("graph") >= 4 and "run" in ran
    for name in ("plan.svg", "run.svg"):
        assert (tmp_path / name).read_bytes().startswith(b"<svg ")
    for name in ("plan.png", "stored.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
