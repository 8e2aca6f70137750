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


_LOADED_BY_COMMAND = """
import json, sys
from toolplan.cli import main
sys.argv = ["toolplan", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""


def _loaded_by(*args: str) -> set[str]:
    """The top-level modules loaded once ``toolplan ARGS`` has run (in a fresh interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-c", _LOADED_BY_COMMAND, *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_store_only_commands_do_not_load_the_web_app(tmp_path: Path) -> None:
    # `keys` and `runs` read and write the store: the service's FastAPI app, GraphQL schema and server stay unloaded.
    web = {"fastapi", "starlette", "strawberry", "uvicorn", "sse_starlette", "graphql"}
    db = f"sqlite:///{tmp_path / 'keys.db'}"
    assert _loaded_by("keys", "create", "ops", "--db", db) & web == set()
    loaded = _loaded_by("keys", "list", "--db", db)
    assert "sqlalchemy" in loaded  # the command did open the store
    assert loaded & web == set()
    assert _loaded_by("runs", "list", "--db", db) & web == set()
