"""Code mode: model-written Python that calls tools, run in a sandbox.

`SubprocessRunner` runs full CPython in a confined child process; `MontyRunner` runs a Python subset
in the Monty interpreter (``pip install "toolplan[monty]"``), the recommended runner for untrusted code.
Both implement `CodeRunner`; the ``execute_code`` meta-tool drives whichever it is given.
"""

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
