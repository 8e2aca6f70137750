from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from cli_support import TOOLS_SOURCE, Cli, Result


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    return tmp_path / "calls.txt"


@pytest.fixture
def cli(tmp_path: Path, calls_file: Path) -> Cli:
    """Run ``python -m toolplan.cli ARGS`` in a subprocess, in ``tmp_path``."""

    def run(*args: str, input: str | None = None, cwd: Path | None = None, io_encoding: str = "utf-8") -> Result:
        env = {**os.environ, "TOOLPLAN_TEST_CALLS": str(calls_file), "PYTHONIOENCODING": io_encoding}
        env.pop("FORCE_COLOR", None)
        proc = subprocess.run(
            [sys.executable, "-m", "toolplan.cli", *args],
            input=input,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",  # what a broken encoder wrote is shown, not raised
            cwd=cwd or tmp_path,
            env=env,
            timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    (tmp_path / "helper_module.py").write_text("def double(x: int) -> int:\n    return 2 * x\n", encoding="utf-8")
    path = tmp_path / "my_tools.py"
    path.write_text(textwrap.dedent(TOOLS_SOURCE), encoding="utf-8")
    return path


@pytest.fixture
def write_plan(tmp_path: Path) -> Callable[..., Path]:
    def write(steps: Sequence[dict[str, Any]], name: str = "plan.json", **extra: Any) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"steps": list(steps), **extra}), encoding="utf-8")
        return path

    return write


@pytest.fixture
def tool_calls(calls_file: Path) -> Callable[[], list[str]]:
    """The tool calls the test tools file recorded so far."""

    def read() -> list[str]:
        if not calls_file.exists():
            return []
        return calls_file.read_text(encoding="utf-8").split()

    return read
