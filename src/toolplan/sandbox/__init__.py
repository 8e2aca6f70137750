"""Code mode: model-written Python that calls tools, run in a sandbox; and the sandboxed built-in tools.

`SubprocessRunner` runs full CPython in a confined child process; `MontyRunner` runs a Python subset
in the Monty interpreter (``pip install "toolplan[monty]"``), the recommended runner for untrusted code.
Both implement `CodeRunner`; the ``execute_code`` meta-tool drives whichever it is given.

Two built-in toolsets run in the same confinement (see ``docs/builtin-tools.md``): `ShellTools`
(``run_shell``: shell commands in one workspace directory) and `PythonTool` (``run_python``: code
mode as a plain tool a plan step can call).
"""

from ._monty import MontyRunner as MontyRunner
from ._python import PythonTool as PythonTool
from ._shell import ShellLimits as ShellLimits
from ._shell import ShellResult as ShellResult
from ._shell import ShellTools as ShellTools
from ._shell import shell_confinement_problem as shell_confinement_problem
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
    "PythonTool",
    "ShellLimits",
    "ShellResult",
    "ShellTools",
    "SubprocessRunner",
    "ToolCaller",
    "shell_confinement_problem",
)
