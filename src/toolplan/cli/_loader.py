"""Loading the CLI's inputs: a plan file (or stdin) and a Python file of tools.

Every problem becomes a `CliInputError` whose message is one line saying what is wrong and how to
fix it; the app prints it and exits with code 2.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from .._errors import ToolplanError, UserError
from .._json import JSONTextError, loads
from ..tools import FunctionTool, Tool, ToolRegistry

__all__ = (
    "CliInputError",
    "load_model_file",
    "load_plan",
    "load_tools",
    "owners_of",
    "split_tools_spec",
    "with_skills",
)

T = TypeVar("T")


class CliInputError(UserError):
    """A command-line input (file, option, tools spec) is unusable; the message is one line."""

    code = "cli_input_error"


def load_plan(path: str) -> Any:
    """The JSON data of the plan at ``path`` (``-`` reads standard input)."""
    where = "standard input" if path == "-" else f"plan file {path!r}"
    if path == "-" and sys.stdin.isatty():  # else the command would seem to hang
        sys.stderr.write(
            "Reading the plan from standard input: paste it, then press Ctrl-D (Ctrl-Z, Enter on Windows).\n"
        )
        sys.stderr.flush()
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliInputError(f"{where} does not exist. Check the path (use '-' to read the plan from stdin).") from None
    except IsADirectoryError:
        raise CliInputError(f"{where} is a directory. Give the path of a .json plan file.") from None
    except UnicodeDecodeError:
        raise CliInputError(f"{where} is not UTF-8 text. Give a JSON plan file.") from None
    except OSError as exc:
        raise CliInputError(f"Cannot read {where}: {exc.strerror or exc}.") from None
    if not text.strip():
        raise CliInputError(f'{where} is empty. Give a JSON plan such as {{"steps": [...]}}.')
    try:
        return loads(text)
    except JSONTextError as exc:
        what = "cannot be read as JSON" if exc.exceeds_limit else "is not valid JSON"
        raise CliInputError(f"{where} {what}: {exc.message}. {exc.advice}.") from None


def split_tools_spec(spec: str) -> tuple[str, str | None]:
    """Split ``FILE.py[:NAME]`` into the path and the optional attribute name."""
    head, sep, tail = spec.rpartition(":")
    # "C:\\tools.py" has a colon too: only a Python identifier after the last colon is a NAME.
    if sep and head and tail.isidentifier() and not head.endswith(("/", "\\")):
        return head, tail
    return spec, None


def load_tools(spec: str) -> ToolRegistry:
    """The tools named by ``FILE.py[:NAME]`` (or ``MODULE[:NAME]``, an importable module) as a registry.

    With ``NAME``, that attribute of the file (a list, dict or `ToolRegistry` of tools, or a single
    tool). Without it, the file's public functions defined in the file itself plus its `Tool`
    objects (``@tool`` functions included).
    """
    path_text, name = split_tools_spec(spec)
    module = _import_module(path_text) if _is_module_name(path_text) else _import_file(path_text)
    try:
        if name is not None:
            return _named_tools(module, path_text, name)
        return _discovered_tools(module, path_text)
    except CliInputError:
        raise
    except ToolplanError as exc:
        raise CliInputError(f"The tools in {path_text!r} cannot be registered: {_one_line(exc.message)}") from None


def load_model_file(path_text: str, name: str) -> object:
    """Attribute ``name`` of Python file ``path_text`` (``--model FILE.py:NAME``); the caller checks its type."""
    module = _import_file(path_text, "model", "--model FILE.py:NAME")
    try:
        return getattr(module, name)
    except AttributeError:
        raise CliInputError(
            f"Model file {path_text!r} has no {name!r}: give the name of a toolplan Model in it (or of a function "
            "that returns one), as --model FILE.py:NAME."
        ) from None


def owners_of(registry: ToolRegistry, kind: type[T]) -> list[T]:
    """The toolsets of class ``kind`` among ``registry``'s tools, each once, in registration order."""
    owners: dict[int, T] = {}
    for name in registry:
        owner = registry.owner(name)
        if isinstance(owner, kind):
            owners.setdefault(id(owner), owner)
    return list(owners.values())


async def with_skills(registry: ToolRegistry) -> ToolRegistry:
    """``registry`` with the stored skills of each `SkillTools` in it as ``skill:NAME`` tools.

    A tools file cannot await `SkillTools.load` itself, and a registry lists a toolset's functions
    when it is added: the toolsets are read, then added again. Only when the tools file imported
    `toolplan.skills` (a registry without skills costs nothing).
    """
    if "toolplan.skills" not in sys.modules:
        return registry
    from ..skills import SkillTools

    owners = owners_of(registry, SkillTools)
    if not owners:
        return registry
    ids = {id(skills) for skills in owners}
    out = registry.without(*(name for name in registry if id(registry.owner(name)) in ids))
    for skills in owners:
        try:
            out.add(await skills.load())
        except ToolplanError as exc:
            message = " ".join(exc.message.split())
            raise CliInputError(f"The saved plans (skills) could not be read: {message}") from None
    return out


def _is_module_name(text: str) -> bool:
    """``pkg.tools`` (no such file here, every part an identifier, not a ``.py`` path) names a module."""
    parts = text.split(".")
    return parts[-1] != "py" and all(p.isidentifier() for p in parts) and not Path(text).exists()


def _import_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliInputError(
                f"No tools file or module {name!r}: there is no such file here and no module of that name "
                "to import. Pass --tools FILE.py[:NAME], or MODULE[:NAME] of an installed package."
            ) from None
        raise CliInputError(_failed_import(f"tools module {name!r}", exc, "")) from None
    except BaseException as exc:  # any failure of user code is reported, never a traceback
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CliInputError(_failed_import(f"tools module {name!r}", exc, "")) from None


def _failed_import(what: str, exc: BaseException, where: str) -> str:
    message = _one_line(str(exc)) or "(no message)"
    return f"Importing {what} failed{where}: {type(exc).__name__}: {message}. Fix it and try again."


def _import_file(path_text: str, kind: str = "tools", usage: str = "--tools FILE.py[:NAME]") -> ModuleType:
    path = Path(path_text)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CliInputError(
            f"{kind.capitalize()} file {path_text!r} {what}. Pass {usage} with the path of a Python file."
        )
    if path.suffix != ".py":
        raise CliInputError(f"{kind.capitalize()} file {path_text!r} is not a .py file. Pass {usage}.")
    module_name = f"_toolplan_cli_{kind}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path.resolve())
    if spec is None or spec.loader is None:
        raise CliInputError(f"Cannot load {kind} file {path_text!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.resolve().parent)
    sys.path.insert(0, directory)
    sys.modules[module_name] = module  # dataclasses and pydantic look the module up while importing
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # any failure of user code is reported, never a traceback
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CliInputError(_failed_import(f"{kind} file {path_text!r}", exc, _location(exc, path))) from None
    finally:
        if directory in sys.path:
            sys.path.remove(directory)
    return module


def _location(exc: BaseException, path: Path) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f" (line {exc.lineno})"
    resolved = str(path.resolve())
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == resolved]
    return f" (line {lines[-1]})" if lines else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _named_tools(module: ModuleType, path_text: str, name: str) -> ToolRegistry:
    if not hasattr(module, name):
        candidates = sorted(
            n for n, obj in vars(module).items() if not n.startswith("_") and _is_candidate(obj, module)
        )
        raise CliInputError(
            f"Tools file {path_text!r} has no attribute {name!r}. Pass --tools {path_text}:NAME with NAME "
            f"one of: {', '.join(candidates) or '(none)'}; or leave out :NAME to use all its public functions."
        )
    obj = getattr(module, name)
    if isinstance(obj, ToolRegistry):
        return obj
    if isinstance(obj, Mapping) or (isinstance(obj, Sequence) and not isinstance(obj, (str, bytes))):
        return ToolRegistry(obj)
    if _is_tool_object(obj) or inspect.isfunction(obj):
        return ToolRegistry([obj])
    raise CliInputError(
        f"{path_text}:{name} is a {type(obj).__name__}; it must be a list, dict or ToolRegistry of tools "
        "(or a single tool)."
    )


def _is_candidate(obj: object, module: ModuleType) -> bool:
    """Could ``obj`` be what a ``:NAME`` points at (a collection of tools or a tool)?"""
    if isinstance(obj, (ToolRegistry, list, tuple, dict)):
        return True
    return _is_tool_object(obj) or _is_own_function(obj, module)


def _is_own_function(obj: object, module: ModuleType) -> bool:
    return inspect.isfunction(obj) and obj.__module__ == module.__name__


def _is_tool_object(obj: object) -> bool:
    return isinstance(obj, FunctionTool) or (
        not isinstance(obj, (type, ToolRegistry)) and not inspect.ismodule(obj) and isinstance(obj, Tool)
    )


def _discovered_tools(module: ModuleType, path_text: str) -> ToolRegistry:
    found: list[object] = []
    for attr, obj in vars(module).items():
        if attr.startswith("_"):
            continue
        if _is_tool_object(obj) or _is_own_function(obj, module):
            found.append(obj)
    if not found:
        raise CliInputError(
            f"Tools file {path_text!r} defines no tools. Define public functions or @tool objects in it, "
            f"or pass --tools {path_text}:NAME naming a list, dict or ToolRegistry."
        )
    registry = ToolRegistry()
    for obj in found:
        try:
            registry.add(obj)  # type: ignore[arg-type]
        except UserError as exc:
            label = getattr(obj, "__name__", None) or getattr(obj, "name", type(obj).__name__)
            raise CliInputError(
                f"{path_text}: {label!r} cannot be a tool: {_one_line(exc.message)} If it is a helper, rename "
                f"it with a leading '_' or pass --tools {path_text}:NAME naming the list of tools."
            ) from None
    return registry
