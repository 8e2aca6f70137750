"""The built-in toolsets' old import paths still work for one release, each with a DeprecationWarning."""

from __future__ import annotations

import subprocess
import sys

import pytest

import toolplan.builtin
import toolplan.sandbox
import toolplan.tools
import toolplan.tools.builtin

OLD_TOOLS_BUILTIN = [
    "BraveSearch",
    "DataTools",
    "FileTools",
    "HttpPolicy",
    "HttpResponse",
    "HttpTools",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxNG",
    "WebSearchTools",
    "search_provider_from_env",
]
OLD_SANDBOX = ["PythonTool", "ShellLimits", "ShellResult", "ShellTools", "shell_confinement_problem"]


@pytest.mark.parametrize("name", OLD_TOOLS_BUILTIN)
def test_tools_builtin_names_warn_and_are_the_new_objects(name: str) -> None:
    message = rf"toolplan\.tools\.builtin\.{name} is deprecated; .* toolplan\.builtin "
    with pytest.warns(DeprecationWarning, match=message):
        old = getattr(toolplan.tools.builtin, name)
    assert old is getattr(toolplan.builtin, name)


def test_tools_builtin_toolset_warns_and_is_tools_toolset() -> None:
    with pytest.warns(DeprecationWarning, match=r"import it from toolplan\.tools "):
        from toolplan.tools.builtin import Toolset
    assert Toolset is toolplan.tools.Toolset


@pytest.mark.parametrize("name", OLD_SANDBOX)
def test_sandbox_names_warn_and_are_the_new_objects(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"toolplan\.sandbox\.{name} is deprecated; .* toolplan\.builtin "):
        old = getattr(toolplan.sandbox, name)
    assert old is getattr(toolplan.builtin, name)


def test_from_import_of_an_old_path_warns_at_the_import() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from toolplan.sandbox import ShellTools
        from toolplan.tools.builtin import FileTools
    assert ShellTools is toolplan.builtin.ShellTools and FileTools is toolplan.builtin.FileTools
    assert {w.filename for w in caught} == {__file__}  # the warning points at the importing line


def test_other_names_are_still_missing() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        toolplan.tools.builtin.Nope  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        toolplan.sandbox.Nope  # noqa: B018
    assert not set(OLD_SANDBOX) & set(toolplan.sandbox.__all__)


def test_importing_the_packages_does_not_warn() -> None:
    code = "import toolplan, toolplan.tools, toolplan.tools.builtin, toolplan.sandbox, toolplan.builtin"
    subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], check=True)
