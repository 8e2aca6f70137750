"""The docs say what the code does, and speak to users.

- Every event type and its fields, every error kind, and the records' fields are in their tables
  (a new field or kind fails here until it is documented).
- docs/architecture.md draws the layers of the layering test (`LAYERS` in tests/test_package.py).
- Shell blocks that start a server name the extra to install and never wait forever.
- No page carries commit ids, issue numbers or internal names; the README's performance table
  names the command that produces each figure.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

from toolplan.agent import AgentEvent
from toolplan.execute import ErrorKind, PlanEvent, PlanResult, StepResult, StepStatus

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("*/*.md"))]
SHELL = re.compile(r"^```(?:bash|sh|console|shell)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
FENCE = re.compile(r"^```[^\n]*\n.*?^```", re.DOTALL | re.MULTILINE)


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line), up to the next heading of its level or higher."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(f"\n{heading}\n")
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(text, start + len(heading) + 2)
    return text[start : end.start() if end else len(text)]


def _rows(text: str) -> dict[str, list[str]]:
    """Markdown table rows by their first cell (backticks stripped)."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            rows[cells[0].strip("`")] = cells
    return rows


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in {"kind", "run_id"}]


def _kind(cls: type) -> str:
    return next(f.default for f in dataclasses.fields(cls) if f.name == "kind")  # type: ignore[return-value]


# -- events, error kinds, records -----------------------------------------------------------------


def test_plans_md_lists_every_plan_event_with_its_fields() -> None:
    rows = _rows(_section(_text("docs/plans.md"), "## Events"))
    for cls in typing.get_args(PlanEvent):
        row = rows.get(cls.__name__)
        assert row is not None, f"docs/plans.md, ## Events: add a row for {cls.__name__}"
        assert row[1] == f"`{_kind(cls)}`", cls.__name__
        missing = [name for name in _fields(cls) if f"`{name}`" not in row[2]]
        assert missing == [], f"docs/plans.md, ## Events: document {cls.__name__}'s fields {missing}"


def test_agents_md_lists_every_agent_event_with_its_fields() -> None:
    text = _section(_text("docs/agents.md"), "## Events")
    rows = _rows(text)
    plan_kinds = {_kind(cls) for cls in typing.get_args(PlanEvent)}
    plan_row = rows["plan events"][1]
    assert [k for k in sorted(plan_kinds) if f"`{k}`" not in plan_row] == [], "docs/agents.md: the plan events row"
    for cls in typing.get_args(AgentEvent):
        if _kind(cls) in plan_kinds:
            continue
        row = rows.get(cls.__name__)
        assert row is not None, f"docs/agents.md, ## Events: add a row for {cls.__name__}"
        assert row[1] == f"`{_kind(cls)}`", cls.__name__
        missing = [name for name in _fields(cls) if f"`{name}`" not in row[2]]
        assert missing == [], f"docs/agents.md, ## Events: document {cls.__name__}'s fields {missing}"


def test_plans_md_names_every_field_of_the_records() -> None:
    text = _section(_text("docs/plans.md"), "## Events")
    for cls in (StepResult, PlanResult):
        missing = [f.name for f in dataclasses.fields(cls) if f"`{f.name}`" not in text]
        assert missing == [], f"docs/plans.md, ## Events: say what {cls.__name__}'s {missing} hold"


def test_the_error_kind_table_has_every_kind_and_only_real_statuses() -> None:
    rows = _rows(_section(_text("docs/plans.md"), "### Error kinds"))
    rows.pop("error.kind")  # the header
    assert sorted(rows) == sorted(typing.get_args(ErrorKind)), "docs/plans.md, ### Error kinds: one row per kind"
    statuses = set(typing.get_args(StepStatus))
    for kind, row in rows.items():
        shown = set(re.findall(r"`(\w+)`", row[1]))
        assert shown and shown <= statuses, f"{kind}: {shown - statuses} is not a step status"


# -- architecture --------------------------------------------------------------------------------


def _layers() -> list[str]:
    """``LAYERS`` of tests/test_package.py, bottom to top (read, not imported)."""
    tree = ast.parse((ROOT / "tests" / "test_package.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LAYERS" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    raise AssertionError("LAYERS not found in tests/test_package.py")


def _drawing(text: str) -> str:
    m = re.search(r"<!-- layers:[^\n]*-->\n```text\n(.*?)```", text, re.DOTALL)
    assert m is not None, "docs/architecture.md: the layers block (```text after the <!-- layers: ... --> line)"
    return m.group(1)


# Descriptions for packages the drawing may not have yet, used in the block printed on a mismatch.
NEW_LAYERS = {"builtin": "built-in toolsets: files, fetch and HTTP, data, web search, shell, Python"}


def test_architecture_md_draws_the_layers_of_the_layering_test() -> None:
    drawing = _drawing(_text("docs/architecture.md"))
    described = {}
    for line in drawing.splitlines():
        name, _, description = line.partition("/")
        described[name] = description.strip()
    expected_order = list(reversed(_layers()))
    if list(described) != expected_order:
        width = max(len(n) for n in expected_order) + 4
        lines = []
        for name in expected_order:
            description = described.get(name) or NEW_LAYERS.get(name, "TODO: what this package is")
            lines.append(f"{name + '/':<{width}}{description}\n")
        block = "".join(lines)
        pytest.fail(
            "docs/architecture.md does not draw LAYERS of tests/test_package.py (top to bottom). "
            f"Replace its layers block with this, and describe any new package:\n\n{block}"
        )
    assert all(d and "TODO" not in d for d in described.values()), "docs/architecture.md: describe every layer"


def test_architecture_md_is_linked_from_the_readme() -> None:
    assert "(docs/architecture.md)" in _text("README.md")


# -- shell blocks that start servers -----------------------------------------------------------


def _shell_blocks() -> list[tuple[str, str]]:
    found = [
        (page.relative_to(ROOT).as_posix(), m.group(1)) for page in PAGES for m in SHELL.finditer(page.read_text())
    ]
    found += [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in sorted((ROOT / "examples").rglob("*.sh"))]
    return found


SERVERS = {"toolplan serve": "service", "toolplan mcp serve": "mcp"}


@pytest.mark.parametrize(("where", "block"), _shell_blocks(), ids=[w for w, _ in _shell_blocks()])
def test_a_block_that_starts_a_server_names_its_extra_and_waits_a_bounded_time(where: str, block: str) -> None:
    for command, extra in SERVERS.items():
        if re.search(rf"^(\S+=\S+ )*{command}\b", block, re.MULTILINE):
            installs = {e for group in re.findall(r"toolplan\[([^\]]+)\]", block) for e in group.split(",")}
            assert extra in installs, f'{where}: a block that runs `{command}` says pip install "toolplan[{extra}]"'
    for line in block.splitlines():
        code = line.split("#")[0]
        assert not re.search(r"\b(until|while)\b", code) or "timeout " in code, (
            f"{where}: a wait loop must end (a `for` over a count, or `timeout N`): {line.strip()}"
        )
        if re.search(r"&\s*$", code) and "serve" in code:  # a server in the background: the next lines wait for it
            assert "did not start" in block, f"{where}: say so when the server does not start, with its log"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("curl") is None, reason="needs curl and jq")
def test_the_service_session_ends_with_the_install_hint_after_a_plain_install(tmp_path: Path) -> None:
    # As after `pip install toolplan` alone: the service's packages cannot be imported.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        textwrap.dedent("""
            import sys

            class _PlainInstall:
                def find_spec(self, name, path=None, target=None):
                    if name.partition(".")[0] in {"fastapi", "uvicorn", "strawberry", "sse_starlette"}:
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

            sys.meta_path.insert(0, _PlainInstall())
        """),
        encoding="utf-8",
    )
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "session.sh"
    script.write_text(_text("examples/service/session.sh").replace("8000", str(port)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        ["bash", "-e", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "toolplan serve did not start" in done.stderr
    assert 'pip install "toolplan[service]"' in done.stderr


# -- the docs speak to users ---------------------------------------------------------------------

JARGON = re.compile(
    r"\bissues? #?\d+|\b(?:the|a|this) brief\b|\bseed system\b|\bcommits?\b [0-9a-f]{7}|\bat [0-9a-f]{7,12}\b",
    re.IGNORECASE,
)
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_pages_carry_no_history_or_internal_names(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    prose = FENCE.sub("", text)
    found = [m.group(0) for m in JARGON.finditer(text)] + [m.group(0) for m in HASH.finditer(prose)]
    assert found == [], f"{page.name}: write for users, not about how toolplan was made: {found}"


def test_the_readme_performance_table_names_a_command_per_row() -> None:
    table = _rows(_section(_text("README.md"), "## Performance"))
    table.pop("What")
    source = (ROOT / "bench" / "__main__.py").read_text(encoding="utf-8")
    benchmarks = set(re.findall(r'^\s+"(\w+)",$', source.split("BENCHMARKS = (")[1].split(")")[0], re.MULTILINE))
    assert len(table) >= 6
    for what, row in table.items():
        m = re.fullmatch(r"`python -m bench (\w+)`", row[-1])
        assert m is not None and m.group(1) in benchmarks, f"README Performance, {what!r}: the command that measures it"


def test_coming_from_calls_nothing_coming() -> None:
    # Every row of the table works today: a feature that is not there is not in the table.
    text = _text("docs/coming-from.md")
    body = text.split("\n", 1)[1]  # past the title, "Coming from ..."
    body = re.sub(r"`[^`\n]*`", "", body)  # code is named as written (a declared plan's state `Planned`)
    found = re.findall(r"[^.|\n]*\b(?:coming|not yet|planned)\b[^.|\n]*", body, re.IGNORECASE)
    assert found == [], f"docs/coming-from.md: {found}"


def test_service_and_live_view_list_every_stored_event_type() -> None:
    # The types a run's journal writes (the service streams them), read from the code.
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "toolplan").rglob("*.py"))
    written = set(re.findall(r"""\.event\(\s*["'](\w+)["']""", source))
    written |= set(re.findall(r"""_append_event\([^,]+,[^,]+,\s*["'](\w+)["']""", source))
    assert {"plan_started", "run_queued", "run_resumed"} <= written  # the patterns still find them
    section = _section(_text("docs/service.md"), "## Events")
    missing = sorted(t for t in written if f"`{t}`" not in section)
    assert missing == [], f"docs/service.md, ## Events: say what {missing} are"
    live_view = _text("docs/live-view.md")
    missing = sorted(t for t in written if f"`{t}`" not in live_view)
    assert missing == [], f"docs/live-view.md: list {missing} among the event types"


def test_service_md_lists_every_error_code_the_service_answers() -> None:
    # Read from the code: the service's own codes (ApiError, error_body, the HTTP errors' map), and
    # every ToolplanError's code, which the one error mapping answers as it is (service/_errors.py).
    import toolplan.client  # (its ServiceError is the client's, not an answer)
    import toolplan.service  # noqa: F401
    from toolplan._errors import ServiceError, ToolplanError

    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src/toolplan/service").glob("*.py"))
    codes = set(re.findall(r"""ApiError\(\s*\w+\s*,\s*["'](\w+)["']""", source))
    codes |= set(re.findall(r"""error_body\(\s*["'](\w+)["']""", source))
    codes |= set(re.findall(r"""\b[45]\d\d: ["'](\w+)["']""", source))  # the HTTP errors' codes
    codes |= set(re.findall(r"""\bcode(?:, \w+)* = ["'](\w+)["']""", source))  # GraphQL's own
    assert {"unauthorized", "request_too_large", "not_found", "internal_error", "invalid_request"} <= codes

    def walk(kind: type[ToolplanError]) -> None:
        for sub in kind.__subclasses__():
            walk(sub)
            code = sub.__dict__.get("code")
            # The kernel's error tree (the CLI's and MCP's own errors never reach the service's answers).
            if isinstance(code, str) and sub is not ServiceError and sub.__module__ in ("toolplan", "toolplan._errors"):
                codes.add(code)

    walk(ToolplanError)
    assert {"user_error", "model_http_error", "run_conflict"} <= codes
    text = _text("docs/service.md")
    missing = sorted(c for c in codes if f"`{c}`" not in text)
    assert missing == [], f"docs/service.md: list the error codes {missing}"
