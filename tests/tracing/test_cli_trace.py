"""``toolplan run --trace FILE``: the span tree of a standalone CLI run, written by a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

TOOLS = '''
from toolplan import ToolError, tool


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def fail(message: str) -> str:
    """Always fail."""
    raise ToolError(message)
'''


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolplan.cli", "run", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
        check=False,
    )


def _tree(spans: list[dict[str, Any]]) -> list[str]:
    ids = {s["context"]["span_id"] for s in spans}
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        children = [s for s in spans if (s["parent_id"] if s["parent_id"] in ids else None) == parent]
        for span in sorted(children, key=lambda s: (s["name"], s["attributes"].get("toolplan.step.id", ""))):
            attrs = span["attributes"]
            text = f"{'  ' * depth}{span['name']} [{span['status']['status_code']}]"
            if "toolplan.step.id" in attrs:
                text += f" step={attrs['toolplan.step.id']}"
            lines.append(text)
            for event in span["events"]:
                lines.append(
                    f"{'  ' * (depth + 1)}event {event['name']} step={event['attributes']['toolplan.step.id']}"
                )
            walk(span["context"]["span_id"], depth + 1)

    walk(None, 0)
    return lines


@pytest.mark.slow  # a subprocess
def test_a_cli_run_writes_its_span_tree_to_a_file(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    plan = {
        "steps": [
            {"id": "one", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "two", "tool": "add", "arguments": {"a": "$ref:one", "b": 3}},
            {"id": "bad", "tool": "fail", "arguments": {"message": "no"}},
            {"id": "after", "tool": "add", "arguments": {"a": "$ref:bad", "b": 1}},
        ]
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    proc = _run(tmp_path, "plan.json", "--tools", "tools.py", "--json", "--trace", "spans.jsonl")
    assert proc.returncode == 1, proc.stderr
    spans = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text(encoding="utf-8").splitlines()]
    assert _tree(spans) == snapshot(
        [
            "invoke_workflow [ERROR]",
            "  event toolplan.step.not_called step=after",
            "  execute_tool add [UNSET] step=one",
            "  execute_tool add [UNSET] step=two",
            "  execute_tool fail [ERROR] step=bad",
        ]
    )
    root = next(s for s in spans if s["name"] == "invoke_workflow")
    assert root["resource"]["attributes"]["service.name"] == "toolplan"
    assert root["attributes"]["toolplan.run.id"] == json.loads(proc.stdout)["run_id"]


@pytest.mark.slow  # a subprocess
def test_trace_to_an_unwritable_place_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    (tmp_path / "plan.json").write_text(
        json.dumps({"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 1}}]})
    )
    proc = _run(tmp_path, "plan.json", "--tools", "tools.py", "--trace", str(tmp_path / "missing" / "spans.jsonl"))
    assert proc.returncode == 2
    assert "--trace: cannot write the spans" in proc.stderr


@pytest.mark.slow  # a subprocess
def test_the_example_prints_the_span_tree() -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "examples" / "tracing" / "trace_a_plan.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1:] == snapshot(
        [
            "invoke_workflow [ERROR]",
            "  event toolplan.step.not_called step=never",
            "  execute_tool weather [UNSET] step=tokyo",
            "    GET /weather/Tokyo [UNSET]",
            "  execute_tool weather [UNSET] step=paris",
            "    GET /weather/Paris [UNSET]",
            "  execute_tool weather [ERROR] step=atlantis",
            "    GET /weather/Atlantis [UNSET]",
            "  execute_tool compare [UNSET] step=cmp",
        ]
    )
