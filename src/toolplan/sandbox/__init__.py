"""Code mode: model-written Python that calls tools, run in a sandbox.

`SubprocessRunner` runs full CPython in a confined child process; `MontyRunner` runs a Python subset
in the Monty interpreter (``pip install "toolplan[monty]"``), the recommended runner for untrusted code.
Both implement `CodeRunner`; the ``execute_code`` meta-tool drives whichever it is given.

The built-in shell and Python toolsets that run in the same confinement, `ShellTools` and `PythonTool`,
live in `toolplan.builtin` (see ``docs/builtin-tools.md``).
"""

from __future__ import annotations

from .._moved import moved_names as _moved_names
from ._monty import MontyRunner as MontyRunner
from ._subprocess import SubprocessRunner as SubprocessRunner
from ._types import CodeLimits as CodeLimits
from ._types import CodeResult as CodeResult
from ._types import CodeRunner as CodeRunner
from ._types import ToolCaller as ToolCaller

__all__ = (
    "CodeLimits",
    "CodeResult",
    "CodeRunner",
    "MontyRunner",
    "SubprocessRunner",
    "ToolCaller",
)

# Deprecated aliases, kept for one release: the shell and Python toolsets moved to toolplan.builtin.
__getattr__ = _moved_names(
    __name__,
    dict.fromkeys(
        ("PythonTool", "ShellLimits", "ShellResult", "ShellTools", "shell_confinement_problem"), "toolplan.builtin"
    ),
)
