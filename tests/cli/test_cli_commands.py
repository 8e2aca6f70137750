"""``toolplan validate``, ``graph``, ``demo``, ``--version`` and bad inputs, in a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import REPO, Calls, Cli, WritePlan

import toolplan

DIAMOND = [
    {"id": "left", "tool": "add", "arguments": {"a": 1, "b": 2}},
    {"id": "right", "tool": "add", "arguments": {"a": 3, "b": 4}},
    {"id": "join", "tool": "add", "arguments": {"a": "$ref:left", "b": "$ref:right"}},
    {"id": "show", "tool": "echo", "arguments": {"value": "{{join}}"}, "depends_on": ["left"]},
]


def test_version(cli: Cli) -> None:
    r = cli("--version")
    assert r.code == 0
    assert r.stdout.strip() == f"toolplan {toolplan.__version__}"


def test_help_lists_commands(cli: Cli) -> None:
    r = cli("--help")
    assert r.code == 0
    for command in ("run", "validate", "graph", "demo"):
        assert command in r.stdout


def test_validate_valid(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(DIAMOND)
    r = cli("validate", str(plan), "--tools", str(tools_file))
    assert r.code == 0, r.stderr
    assert "The plan is valid: 4 steps in 3 waves." in r.stdout
    r = cli("validate", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 0
    assert r.json() == {"status": "valid", "errors": [], "warnings": []}
    assert tool_calls() == []


def test_validate_invalid(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(
        [
            {"id": "s1", "tool": "add", "arguments": {"a": "one", "b": 2}},
            {"id": "s1", "tool": "echo", "arguments": {"value": 1}},
            {"id": "s3", "tool": "echo", "arguments": {"value": "$ref:s4"}},
            {"id": "s4", "tool": "echo", "arguments": {"value": "$ref:s3"}},
        ],
        output_steps=["s9"],
    )
    r = cli("validate", str(plan), "--tools", str(tools_file), "--json")
    assert r.code == 2
    data = r.json()
    assert data["status"] == "invalid"
    codes = {e["code"] for e in data["errors"]}
    assert {"duplicate_id", "invalid_arguments", "cycle", "unknown_output_step"} <= codes
    r = cli("validate", str(plan), "--tools", str(tools_file))
    assert r.code == 2
    assert "The plan is invalid" in r.stdout
    assert "[cycle]" in r.stdout
    assert tool_calls() == []


def test_validate_structure_only(cli: Cli, write_plan: WritePlan) -> None:
    ok = write_plan([{"id": "s1", "tool": "anything", "arguments": {"x": 1}}], name="ok.json")
    r = cli("validate", str(ok))
    assert r.code == 0, r.stderr
    assert "structure only" in r.stdout
    bad = write_plan([{"id": "s1", "tool": "anything", "arguments": {"x": "$ref:missing"}}], name="bad.json")
    r = cli("validate", str(bad), "--json")
    assert r.code == 2
    assert [e["code"] for e in r.json()["errors"]] == ["unknown_reference"]


def test_validate_chaining_dialect(cli: Cli, tools_file: Path, tmp_path: Path) -> None:
    plan = tmp_path / "chain.json"
    plan.write_text(
        json.dumps(
            {
                "tools": [
                    {"name": "add", "parameters": {"a": 1, "b": 2}},
                    {"name": "echo", "parameters": {"value": "{{add}}"}, "dependsOn": "add"},
                ],
                "executionOrder": ["add", "echo"],
            }
        ),
        encoding="utf-8",
    )
    r = cli("run", str(plan), "--tools", str(tools_file), "--json", "--dialect", "chaining")
    assert r.code == 0, r.stderr
    assert r.json()["outputs"] == {"add": 3, "echo": 3}


def test_graph(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    plan = write_plan(DIAMOND)
    r = cli("graph", str(plan), "--tools", str(tools_file))
    assert r.code == 0, r.stderr
    text = r.stdout
    assert text.startswith("flowchart TD")
    nodes = dict(re.findall(r'(n\d+)\["(\w+): \w+"\]', text))
    ids = {v: k for k, v in nodes.items()}
    assert set(ids) == {"left", "right", "join", "show"}
    edges = set(re.findall(r"(n\d+) --> (n\d+)", text))
    assert edges == {
        (ids["left"], ids["join"]),
        (ids["right"], ids["join"]),
        (ids["left"], ids["show"]),
        (ids["join"], ids["show"]),
    }
    assert 'wave0["wave 1"]' in text and 'wave2["wave 3"]' in text
    assert tool_calls() == []


def test_graph_without_tools_and_invalid(cli: Cli, write_plan: WritePlan) -> None:
    plan = write_plan(DIAMOND)
    assert cli("graph", str(plan)).code == 0
    bad = write_plan([{"id": "a", "tool": "t", "depends_on": ["a"]}], name="bad.json")
    r = cli("graph", str(bad))
    assert r.code == 2
    assert "self_reference" in r.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "missing.json", "--tools", "{tools}"], "plan file 'missing.json' does not exist"),
        (["run", "{notjson}", "--tools", "{tools}"], "is not valid JSON"),
        (["run", "{plan}", "--tools", "nowhere.py"], "Tools file 'nowhere.py' does not exist"),
        (["run", "{plan}", "--tools", "{plan}"], "is not a .py file"),
        (["run", "{plan}", "--tools", "{broken}"], "ZeroDivisionError"),
        (["run", "{plan}", "--tools", "{syntax}"], "SyntaxError"),
        (["run", "{plan}", "--tools", "{exits}"], "SystemExit"),
        (["run", "{plan}", "--tools", "{tools}:MISSING"], "has no attribute 'MISSING'"),
        (["run", "{plan}", "--tools", "no_such_module"], "no module of that name"),
        (["run", "{plan}", "--tools", "no_such_pkg.tools:TOOLS"], "no module of that name"),
        (["run", "{plan}", "--tools", "broken"], "Importing tools module 'broken' failed: ZeroDivisionError"),
        (["run", "{plan}", "--tools", "{tools}:NOT_TOOLS"], "must be a list, dict or ToolRegistry"),
        (["run", "{plan}", "--tools", "{empty}"], "defines no tools"),
        (["run", "{plan}", "--tools", "{varargs}"], "cannot be a tool"),
        (["run", "{plan}"], "pass --tools FILE.py"),
        (
            ["run", "{plan}", "--tools", "{tools}", "--max-concurrency", "0"],
            "--max-concurrency must be a whole number >= 1",
        ),
        (["run", "{plan}", "--tools", "{tools}", "--timeout", "-1"], "--timeout must be a finite number > 0 seconds"),
        (["run", "{plan}", "--tools", "{tools}", "--max-steps", "0"], "--max-steps must be at least 1"),
        (["validate", "{empty_plan}"], "is empty"),
        (["validate", "{dir}"], "is a directory"),
        (["graph", "missing.json"], "does not exist"),
    ],
)
def test_bad_inputs_one_line(
    cli: Cli, tools_file: Path, write_plan: WritePlan, tmp_path: Path, tool_calls: Calls, args: list[str], expected: str
) -> None:
    files = {
        "tools": str(tools_file),
        "plan": str(write_plan([{"id": "s1", "tool": "add", "arguments": {"a": 1, "b": 2}}])),
        "notjson": "notjson.json",
        "empty_plan": "empty.json",
        "broken": "broken.py",
        "syntax": "syntax.py",
        "exits": "exits.py",
        "empty": "empty.py",
        "varargs": "varargs.py",
        "dir": str(tmp_path),
    }
    (tmp_path / "notjson.json").write_text("{'steps': []}", encoding="utf-8")
    (tmp_path / "empty.json").write_text("  \n", encoding="utf-8")
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n", encoding="utf-8")
    (tmp_path / "syntax.py").write_text("def f(:\n", encoding="utf-8")
    (tmp_path / "exits.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    (tmp_path / "empty.py").write_text("import os\n_private = 1\n", encoding="utf-8")
    (tmp_path / "varargs.py").write_text("def f(*args: int) -> int:\n    return 0\n", encoding="utf-8")
    r = cli(*(a.format(**files) for a in args))
    assert r.code == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ")
    assert expected in lines[0]
    assert "Traceback" not in r.stderr
    assert tool_calls() == []


def test_tools_from_an_importable_module(cli: Cli, tools_file: Path, write_plan: WritePlan, tool_calls: Calls) -> None:
    # --tools MODULE[:NAME]: the tools of an installed package (here my_tools.py, importable from the cwd).
    plan = write_plan([{"id": "s1", "tool": "add", "arguments": {"a": 1, "b": 2}}])
    r = cli("run", str(plan), "--tools", tools_file.stem, "--json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["outputs"] == {"s1": 3}
    assert tool_calls() == ["add"]


def test_import_error_names_the_line(cli: Cli, write_plan: WritePlan, tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n", encoding="utf-8")
    r = cli("run", str(write_plan([{"id": "s1", "tool": "t"}])), "--tools", "broken.py")
    assert "(line 2)" in r.stderr


def test_unknown_option_is_a_usage_error(cli: Cli, write_plan: WritePlan) -> None:
    r = cli("validate", str(write_plan([{"id": "s1", "tool": "t"}])), "--bogus")
    assert r.code == 2
    assert "Traceback" not in r.stderr


def test_demo(cli: Cli) -> None:
    r = cli("demo")
    assert r.code == 0, r.stderr
    out = r.stdout
    assert "Outputs" in out
    assert "wave 1: tokyo, london, paris, new_york, atlantis" in out
    assert "Critical path: " in out
    assert "achieved parallelism" in out
    assert "Traceback" not in r.stderr


def test_demo_caps_each_agent_runs_model_spend(cli: Cli) -> None:
    r = cli("demo", "--max-total-tokens", "40")  # the plan mode reads more at once
    assert r.code == 0, r.stderr
    assert "Planning mode answer (usage_limit)" in r.stdout and "Traceback" not in r.stderr


def test_demo_refuses_a_bad_price_before_running_anything(cli: Cli) -> None:
    r = cli("demo", "--price", "demo=1")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith("Error: --price 'demo=1': write MODEL=IN,OUT or MODEL=IN,OUT,CACHED")


@pytest.mark.parametrize("model", ["foo:bar", "openai:gpt-4o-mini"])
def test_demo_checks_the_model_before_running_anything(cli: Cli, model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # An unknown provider, or a missing API key, is one error line before the demo prints anything.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    r = cli("demo", "--model", model)
    assert r.code == 2, r.stdout
    assert r.stderr.startswith("Error:") and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_quickstart_example(cli: Cli, tool_calls: Calls) -> None:
    tools = "examples/quickstart/tools.py"
    r = cli("run", "examples/quickstart/plan.json", "--tools", tools, "--json", cwd=REPO)
    assert r.code == 0, r.stderr
    data = r.json()
    assert set(data["outputs"]) == {"tokyo_vs_london", "summary"}
    comparison = data["outputs"]["tokyo_vs_london"]
    assert {comparison["warmer"], comparison["colder"]} == {"Tokyo", "London"}
    assert comparison["note"].startswith("Tokyo is ")
    assert data["outputs"]["summary"].startswith("Three cities: ")
    r = cli("validate", "examples/quickstart/bad_plan.json", "--tools", tools, "--json", cwd=REPO)
    assert r.code == 2
    codes = {e["code"] for e in r.json()["errors"]}
    assert {"unknown_tool", "duplicate_id", "invalid_arguments", "unknown_reference", "cycle"} <= codes


def test_import_toolplan_does_not_load_the_cli() -> None:
    code = "import sys, toolplan; print(sorted(m for m in ('typer', 'rich', 'click') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
