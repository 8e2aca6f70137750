"""The picture docs/plan-graph.svg (README): `toolplan graph` of a run of the quickstart plan in which
one lookup fails. Rewritten by the tests with TOOLPLAN_UPDATE_DOCS=1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ui_support import REPO, UPDATE_DOCS

_quickstart = json.loads((REPO / "examples" / "quickstart" / "plan.json").read_text(encoding="utf-8"))
DOCS_PLAN: dict[str, Any] = {
    **_quickstart,
    "steps": [
        s | {"arguments": {"location": " "}} if s["id"] == "paris" else s  # a blank city: get_weather refuses it
        for s in _quickstart["steps"]
    ],
}


def docs_graph_svg(tmp_path: Path) -> bytes:
    """Run the plan with `toolplan run --json`, draw it with `toolplan graph --result`; the SVG."""
    plan, result, picture = tmp_path / "plan.json", tmp_path / "result.json", tmp_path / "plan-graph.svg"
    plan.write_text(json.dumps(DOCS_PLAN), encoding="utf-8")
    toolplan = [sys.executable, "-m", "toolplan.cli"]
    tools = str(REPO / "examples" / "quickstart" / "tools.py")
    run = subprocess.run([*toolplan, "run", str(plan), "--tools", tools, "--json", "--run-id", "quickstart"],
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode == 1, run.stderr  # a step failed
    result.write_text(run.stdout, encoding="utf-8")
    graph = subprocess.run([*toolplan, "graph", str(plan), "--result", str(result), "-o", str(picture)],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert graph.returncode == 0, graph.stderr
    body = picture.read_bytes()
    if UPDATE_DOCS:
        (REPO / "docs" / "plan-graph.svg").write_bytes(body)
    return body
