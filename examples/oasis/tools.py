"""The built-in tools under oasis's names, confined to ``workspace/`` next to this file.

For the command line: ``toolplan run examples/oasis/batch.json --tools examples/oasis/tools.py:TOOLS``.
"""

from __future__ import annotations

from pathlib import Path

from toolplan.builtin import DataTools, FileTools

WORKSPACE = Path(__file__).resolve().parent / "workspace"
TOOLS = [FileTools(WORKSPACE, names="oasis", read_only=True), DataTools(names="oasis")]
