"""Every ``$ toolplan ...`` example of docs/cli.md runs, with the exit code and output shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
from cli_support import REPO

DOC = REPO / "docs" / "cli.md"


@dataclass
class Example:
    command: str
    exit_code: int
    expected: list[str] = field(default_factory=list[str])


def _examples() -> list[Example]:
    examples: list[Example] = []
    for block in re.findall(r"```console\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                m = re.match(r"\$ (.*?)(?:\s+# exit (\d+))?$", line)
                assert m is not None
                examples.append(Example(m.group(1), int(m.group(2) or 0)))
            elif line.strip():
                examples[-1].expected.append(line.rstrip())
    return examples


EXAMPLES = _examples()


def test_the_docs_have_examples() -> None:
    commands = " ".join(e.command for e in EXAMPLES)
    for sub in ("toolplan run", "toolplan validate", "toolplan graph", "toolplan demo", "toolplan --version"):
        assert sub in commands


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.command for e in EXAMPLES])
def test_doc_example(example: Example) -> None:
    bindir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "PYTHONIOENCODING": "utf-8"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        ["bash", "-c", example.command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert proc.returncode == example.exit_code, proc.stderr
    assert "Traceback" not in proc.stderr
    actual = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
    for expected in example.expected:
        pattern = re.compile(".*".join(re.escape(part) for part in expected.split("…")))
        assert any(pattern.fullmatch(line) for line in actual), f"{expected!r} not in output:\n{proc.stdout}"
