"""The CLI package's shape: the app is only wired in ``_app.py``, modules stay small, startup stays light."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import REPO

CLI = REPO / "src" / "toolplan" / "cli"


def _imports(path: Path) -> set[str]:
    """The modules of the cli package that ``path`` imports (``._common`` -> ``_common``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is not None:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_no_command_module_imports_the_app() -> None:
    importers = sorted(p.name for p in CLI.glob("*.py") if "_app" in _imports(p))
    assert importers == ["__init__.py"], importers  # the commands import _common; only the package imports the app


def test_the_shared_module_imports_no_command() -> None:
    commands = {p.stem for p in CLI.glob("_*.py")} - {"_common", "_loader", "_render", "_table", "__init__"}
    assert not _imports(CLI / "_common.py") & commands


def test_the_cli_modules_import_each_other_without_a_cycle() -> None:
    graph = {p.stem: _imports(p) for p in CLI.glob("*.py")}  # function-level imports count too

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for module in sorted(graph.get(path[-1], ())):
            if module == start:
                return [*path, module]
            if module not in path:
                found = cycle_from(start, [*path, module])
                if found:
                    return found
        return None

    cycles = [c for c in (cycle_from(m, [m]) for m in graph) if c]
    assert not cycles, cycles


def test_no_cli_module_is_over_600_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in CLI.glob("*.py")}
    assert max(sizes.values()) <= 600, sizes


def test_importing_the_cli_imports_no_optional_dependency() -> None:
    code = "import json, sys, toolplan.cli; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True)
    loaded = set(json.loads(proc.stdout))
    optional = {"fastapi", "uvicorn", "strawberry", "sse_starlette", "ray", "mcp", "httpx", "openai", "anthropic"}
    assert not loaded & optional, loaded & optional
    assert "sqlalchemy" not in loaded  # the store is imported when a command opens one
