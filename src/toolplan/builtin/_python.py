"""`PythonTool`: the code-mode sandbox as a plain tool, so a plan step can compute with Python."""

from __future__ import annotations

import json
import keyword
from typing import Any

from .._errors import ToolError, UserError
from ..sandbox import CodeLimits, MontyRunner, SubprocessRunner
from ..tools import FunctionTool, ToolAnnotations, Toolset

__all__ = ("PythonTool",)

_RESERVED = frozenset({"call_tool", "call_tools_parallel", "set_result", "ToolCallError"})


class PythonTool(Toolset):
    """``run_python``: Python in the code-mode sandbox, as a tool a plan step can call.

    It is ``execute_code`` without the tools: the code gets the step's ``inputs`` (usually ``$ref``s
    to earlier steps' outputs) as variables and returns a value with ``set_result(value)``, which
    becomes the step's output (without it, the printed text is). Plans cannot nest, so the code
    cannot call tools; use ``execute_code`` (an agent's ``code_execution``) for code that does.

    The sandbox is the runner's: `SubprocessRunner` (the default: full CPython, standard library,
    no network, a fresh empty workspace per call) or `MontyRunner` (a Python subset in a sandboxed
    interpreter). ``run_python`` is read-only and idempotent: a call changes nothing outside its
    own throwaway sandbox.

    Args:
        runner: Where the code runs (default: a `SubprocessRunner`).
        limits: Time, memory and output limits of one call (default: the runner's).
        prefix: Put in front of the function name (see `Toolset`).
    """

    def __init__(
        self,
        runner: SubprocessRunner | MontyRunner | None = None,
        *,
        limits: CodeLimits | None = None,
        prefix: str = "",
    ) -> None:
        if runner is not None and not isinstance(runner, SubprocessRunner | MontyRunner):
            raise UserError(
                f"PythonTool runs code with a SubprocessRunner or a MontyRunner, not {type(runner).__name__} "
                "(it passes the step's inputs to the runner, which the CodeRunner protocol does not cover)."
            )
        self.runner = runner or SubprocessRunner()
        self.limits = limits or self.runner.limits
        self._tool = f"{prefix}run_python"
        annotations = ToolAnnotations(read_only=True, idempotent=True, timeout=self.limits.wall_time + 15)
        super().__init__([FunctionTool(self.run_python, annotations=annotations)], prefix=prefix)

    async def run_python(self, code: str, inputs: dict[str, Any] | None = None) -> Any:
        """Run Python code in a sandbox (no network, no tools) and return what it passes to set_result(value).

        Each key of inputs becomes a variable of the code, e.g. inputs={"rows": [...]} gives `rows`.
        Without set_result, the printed output is returned instead.

        Args:
            code: The Python source, e.g. 'set_result(sum(r["amount"] for r in rows))'.
            inputs: Values the code gets as variables (JSON data; use $ref to pass earlier results).
        """
        if not code.strip():
            raise ToolError("code is empty: give the Python source to run.", tool=self._tool)
        inputs = inputs or {}
        for name in inputs:
            if not name.isidentifier() or keyword.iskeyword(name) or name in _RESERVED or name.startswith("__"):
                raise ToolError(
                    f"inputs key {name!r} cannot be a variable name: use Python identifiers that are not keywords "
                    f"or {', '.join(sorted(_RESERVED))}.",
                    tool=self._tool,
                )
        size = len(json.dumps(inputs, ensure_ascii=False, default=str))
        if size > self.limits.max_message_bytes:
            raise ToolError(
                f"inputs are {size} bytes of JSON; the limit is {self.limits.max_message_bytes}. Pass less data "
                "(select the fields you need first, e.g. with json_query).",
                tool=self._tool,
            )

        async def no_tools(name: str, args: dict[str, Any]) -> Any:
            raise ToolError(
                f"run_python cannot call tools (here {name!r}): it runs inside a plan step. Add a plan step "
                "for the tool and pass its output to this step in inputs.",
                tool=self._tool,
            )

        result = await self.runner.run(code, call_tool=no_tools, limits=self.limits, inputs=inputs)
        if not result.ok:
            logs = f" Printed before the failure: {result.logs[-500:]!r}." if result.logs else ""
            limit = f" (limit: {result.limit})" if result.limit else ""
            raise ToolError(f"The code failed{limit}:\n{result.error}{logs}", tool=self._tool)
        return result.result if result.result_set else result.logs
