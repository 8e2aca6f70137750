"""Every ```python block of docs/models.md runs, in order, in one namespace (```python test="skip" excepted)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from toolplan.testing import forbid_model_requests

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[tuple[int, str]]:
    text = DOC.read_text()
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in BLOCK.finditer(text)
        if 'test="skip"' not in m.group(1)
    ]


def test_doc_has_examples() -> None:
    assert len(blocks()) >= 6


def test_doc_examples_run() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_models"}
    # No example may reach a real provider.
    with forbid_model_requests():
        for line, code in blocks():
            try:
                exec(compile(code, f"{DOC}:{line}", "exec"), namespace)
            except Exception as exc:
                exc.add_note(f"in the example at docs/models.md line {line}")
                raise
