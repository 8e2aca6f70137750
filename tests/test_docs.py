"""Every ```python block of README.md and docs/*.md runs (```python test="skip" excepted).

The blocks of one page run in order, in one fresh Python process (so later blocks may use earlier
ones' names), in a temporary directory, with real model requests forbidden.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
PRELUDE = "from toolplan.testing import forbid_model_requests as _forbid\n_forbid()\n"


def blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(2))
        for m in BLOCK.finditer(text)
        if 'test="skip"' not in m.group(1)
    ]


def script(page: Path) -> str:
    # Each block keeps its line numbers in tracebacks: pad with blank lines up to where it starts.
    out = [PRELUDE]
    line = PRELUDE.count("\n") + 1
    for start, code in blocks(page):
        if start > line:
            out.append("\n" * (start - line))
            line = start
        out.append(code)
        line += code.count("\n")
    return "".join(out)


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    path = tmp_path / page.name.replace(".md", ".py")
    path.write_text(script(page))
    done = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{page.name} (line numbers match the page):\n{done.stderr}"
