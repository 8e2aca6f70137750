"""The shared ``toolplan._ui`` package: where it sits between the layers, and what the wheel ships."""

from __future__ import annotations

import ast
from pathlib import Path

import toolplan

UI = Path(toolplan.__file__).parent / "_ui"
# It serves the two top layers (cli/, service/) and uses only these of toolplan's own modules.
ALLOWED = {"plan", "execute", "_json", "_errors", "_ui"}


def _toolplan_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("toolplan."):
            found.add((node.module or "").split(".")[1])
    return found


def test_ui_imports_only_lower_layers() -> None:
    used = {p.name: _toolplan_imports(p) for p in UI.glob("*.py")}
    assert {name: sorted(m - ALLOWED) for name, m in used.items() if m - ALLOWED} == {}


def test_the_page_ships_its_files_and_the_layout_librarys_license() -> None:
    static = UI / "static"
    names = {p.relative_to(static).as_posix() for p in static.rglob("*") if p.is_file()}
    assert names == {
        "index.html",
        "home.html",
        "home.js",
        "key.js",
        "live.js",
        "live.css",
        "vendor/dagre.min.js",
        "vendor/dagre.LICENSE",
    }
    license_text = (static / "vendor" / "dagre.LICENSE").read_text(encoding="utf-8")
    assert "Permission is hereby granted, free of charge" in license_text  # MIT
    page = (static / "index.html").read_text(encoding="utf-8")
    assert "http" not in page.replace("http-equiv", "")  # nothing from elsewhere: no CDN
    home = (static / "home.html").read_text(encoding="utf-8")
    assert "http" not in home  # the service's home page: likewise
