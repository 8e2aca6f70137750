"""The CLI on hostile files and values, and on terminals that cannot encode everything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import Cli, Result

HOSTILE_TOOLS = '''
from typing import Any


def weather(city: str) -> dict[str, Any]:
    """Weather with characters an ASCII terminal lacks, NaN and a lone surrogate."""
    return {"city": city, "temp": "21 °C", "humidity": float("nan"), "wind": float("inf"), "note": "\\ud800"}


def huge() -> int:
    """An integer too long to print."""
    return 10**5000


def page() -> str:
    """A fetched page: JSON text nested 1,000 deep."""
    return "[" * 1000 + "]" * 1000


def shout() -> str:
    """Fail with a 2 MB message."""
    raise ValueError("E" * 2_000_000)
'''


def strict_json(text: str) -> Any:
    def reject(name: str) -> Any:
        raise AssertionError(f"bare {name} in the JSON output")

    return json.loads(text, parse_constant=reject)


def one_error_line(r: Result, *words: str) -> None:
    assert r.code == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[:2000]
    assert lines[0].startswith("Error: ")
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}", ("nested deeper than 200 levels", "line 1, column")),
        ('{"steps": [], "n": ' + "7" * 5000 + "}", ("a number with more than 4,300 digits",)),
    ],
    ids=["nested-100000", "number-5000-digits"],
)
@pytest.mark.parametrize("command", ["run", "validate", "graph"])
def test_hostile_plan_files_give_one_error_line(
    cli: Cli, tools_file: Path, tmp_path: Path, command: str, content: str, words: tuple[str, ...]
) -> None:
    (tmp_path / "hostile.json").write_text(content, encoding="utf-8")
    args = ["hostile.json"] if command != "run" else ["hostile.json", "--tools", str(tools_file)]
    one_error_line(cli(command, *args), "plan file 'hostile.json' cannot be read as JSON", *words)


def test_hostile_arguments_text_is_an_invalid_plan(cli: Cli, tmp_path: Path) -> None:
    plan = {"steps": [{"id": "a", "tool": "t", "arguments": '{"x": ' + "[" * 1000 + "]" * 1000 + "}"}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    r = cli("validate", "plan.json", "--json")
    assert r.code == 2, r.stderr
    assert [e["code"] for e in r.json()["errors"]] == ["invalid_arguments_json"]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_json_output_is_valid_json_with_hostile_values(cli: Cli, tmp_path: Path, encoding: str) -> None:
    (tmp_path / "hostile_tools.py").write_text(HOSTILE_TOOLS, encoding="utf-8")
    steps = [
        {"id": "w", "tool": "weather", "arguments": {"city": "Zürich"}},
        {"id": "h", "tool": "huge"},
        {"id": "s", "tool": "shout"},
    ]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    r = cli("run", "plan.json", "--tools", "hostile_tools.py", "--json", io_encoding=encoding)
    assert r.code == 1, r.stderr[:2000]
    assert "Traceback" not in r.stderr
    if encoding == "ascii":
        assert r.stdout.isascii()
    data = strict_json(r.stdout)
    assert data["outputs"]["w"] == {
        "city": "Zürich",
        "temp": "21 °C",
        "humidity": "NaN",
        "wind": "Infinity",
        "note": "\ufffd",
    }
    assert data["outputs"]["h"] == "<an integer of about 5,001 digits: not shown>"


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_table_output_never_tracebacks_on_encoding(cli: Cli, tmp_path: Path, encoding: str) -> None:
    (tmp_path / "hostile_tools.py").write_text(HOSTILE_TOOLS, encoding="utf-8")
    steps = [{"id": "w", "tool": "weather", "arguments": {"city": "Zürich"}}, {"id": "h", "tool": "huge"}]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    r = cli("run", "plan.json", "--tools", "hostile_tools.py", io_encoding=encoding)
    assert r.code == 0, r.stderr[:2000]
    assert "Traceback" not in r.stderr
    assert "Plan succeeded" in r.stdout
    assert ("21 \\xb0C" if encoding == "ascii" else "21 °C") in r.stdout


def test_demo_on_an_ascii_terminal(cli: Cli) -> None:
    r = cli("demo", io_encoding="ascii")
    assert r.code == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "\\xb0C" in r.stdout  # '°C', escaped
    assert "Critical path: " in r.stdout


def test_an_unresolvable_reference_never_tracebacks(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "hostile_tools.py").write_text(HOSTILE_TOOLS, encoding="utf-8")
    steps = [{"id": "p", "tool": "page"}, {"id": "w", "tool": "weather", "arguments": {"city": "$ref:p.0"}}]
    (tmp_path / "plan.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    r = cli("run", "plan.json", "--tools", "hostile_tools.py")
    # The step fails (exit 1) once the executor catches ReferenceResolutionError; until then the
    # run ends with one error line (exit 2). Never a traceback.
    assert r.code in (1, 2), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "nested deeper than 200 levels" in r.stdout + r.stderr
