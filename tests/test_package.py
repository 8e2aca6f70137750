"""The package's shape: public names, import direction between layers, no optional imports."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import toolplan

SRC = Path(toolplan.__file__).parent

# DESIGN.md §1, bottom to top: a package may import only from packages at or below its level.
LAYERS = [
    "tools",
    "plan",
    "execute",
    "policy",
    "sandbox",
    "models",
    "agent",
    "planner",
    "store",
    "testing",
    "service",
    "cli",
    "integrations",
]


def test_all_names_are_importable_and_exported() -> None:
    for name in toolplan.__all__:
        assert hasattr(toolplan, name), name
    public = {n for n in vars(toolplan) if not n.startswith("_") and n not in {"annotations"}}
    submodules = {m.name for m in pkgutil.iter_modules([str(SRC)])}
    assert public - set(toolplan.__all__) - submodules == set()


@pytest.mark.parametrize("package", sorted(m.name for m in pkgutil.iter_modules([str(SRC)]) if m.ispkg))
def test_subpackage_all(package: str) -> None:
    module = importlib.import_module(f"toolplan.{package}")
    assert isinstance(module.__all__, tuple)
    for name in module.__all__:
        assert hasattr(module, name), f"toolplan.{package}.{name}"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 2 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith("toolplan."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("toolplan."):
                    found.add(alias.name.split(".")[1])
    return found


def test_layers_only_import_downwards() -> None:
    problems = []
    for package in LAYERS:
        directory = SRC / package
        if not directory.is_dir():
            continue
        level = LAYERS.index(package)
        for path in directory.rglob("*.py"):
            for imported in _imports(path):
                if imported in LAYERS and LAYERS.index(imported) > level:
                    problems.append(f"{path.relative_to(SRC)} imports toolplan.{imported}")
    assert problems == []


def test_import_toolplan_loads_no_optional_dependency() -> None:
    code = (
        "import sys, toolplan\n"
        "bad = [m for m in ('openai', 'anthropic', 'pydantic_monty', 'llama_cpp', 'typer', 'rich', 'jsonschema')"
        " if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
