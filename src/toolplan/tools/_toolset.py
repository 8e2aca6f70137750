"""`Toolset`: several tool functions behind one `Tool`, the shape of every built-in toolset."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from .._errors import UnknownToolError, UserError
from ._definition import ToolAnnotations, ToolDefinition
from ._function import FunctionTool
from ._result import ToolResult
from ._schema_tool import schema_tools

__all__ = ("Toolset",)


class Toolset:
    """A multi-function `Tool` made of `FunctionTool`s, usually a class's own methods.

    A subclass builds its functions from bound methods, so each method's signature is the schema the
    model sees, its docstring the description, and calling the method from Python calls the function
    directly::

        class Notes(Toolset):
            def __init__(self, *, prefix: str = "") -> None:
                super().__init__([FunctionTool(self.add_note, annotations=...)], prefix=prefix)

            def add_note(self, text: str) -> str:
                \"\"\"Remember a note.\"\"\"
                ...

    Args:
        functions: The functions the toolset offers.
        prefix: Put in front of every function name (``"fs_"`` makes ``fs_read_file``), so two
            toolsets of one kind, or a toolset and a tool of your own, can share a registry.
        resource: The state the functions share (see `ToolAnnotations.resource`), for each function
            that names none itself: their calls run one at a time, in plan order.
        deferred: Keep the functions out of the model's tool list: it finds them with
            ``search_tools`` (a registry reads this when the toolset is added).
    """

    deferred: bool = False

    def __init__(
        self,
        functions: Iterable[FunctionTool[Any]],
        *,
        prefix: str = "",
        resource: str | None = None,
        deferred: bool = False,
    ) -> None:
        self.deferred = deferred
        self._functions: dict[str, FunctionTool[Any]] = {}
        for function in functions:
            annotations = function.definition.annotations
            if resource is not None and annotations.resource is None:
                annotations = replace(annotations, resource=resource)
            if prefix or annotations is not function.definition.annotations:
                function = FunctionTool(
                    function.function,
                    name=prefix + function.name,
                    description=function.definition.description,
                    annotations=annotations,
                    strict=function.strict,
                )
            if function.name in self._functions:
                raise UserError(f"Toolset {type(self).__name__} has two functions named {function.name!r}.")
            self._functions[function.name] = function

    @classmethod
    def from_definitions(
        cls,
        definitions: Iterable[Mapping[str, Any]],
        handler: Callable[[str, dict[str, Any]], Any],
        *,
        prefix: str = "",
        strict: bool = False,
        annotations: ToolAnnotations | Mapping[str, ToolAnnotations] | None = None,
    ) -> Toolset:
        """A toolset of a function catalog: one function per definition, each call ``handler(name, arguments)``.

        A definition is OpenAI's ``{"type": "function", "function": {...}}`` or a plain ``{"name",
        "description", "parameters"}`` (``input_schema``/``inputSchema`` are read too). Each becomes a
        tool as `Tool.from_schema` makes it; ``handler`` (sync or async) gets the definition's name and
        the checked arguments as one dict. ``annotations`` applies to every function, or maps names to
        their own.
        """

        toolset = cls([])
        toolset._functions = cast(
            "dict[str, FunctionTool[Any]]",
            schema_tools(definitions, handler, prefix=prefix, strict=strict, annotations=annotations),
        )
        return toolset

    @property
    def names(self) -> list[str]:
        """The names of the functions, as the model sees them (prefix included)."""
        return list(self._functions)

    def definitions(self) -> Sequence[ToolDefinition]:
        """One definition per function: name, description, schemas and annotations."""
        return [function.definition for function in self._functions.values()]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call function ``name`` with ``arguments`` (validated against its schema)."""
        function = self._functions.get(name)
        if function is None:
            raise UnknownToolError(name, self.names)
        return await function.execute(name, arguments)

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Problems with the literal ``arguments`` of function ``name`` (``deferred`` keys come later)."""
        function = self._functions.get(name)
        if function is None:
            return [str(UnknownToolError(name, self.names))]
        return function.argument_problems(name, arguments, deferred)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self.names)})"
