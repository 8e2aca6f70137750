from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeGuard, runtime_checkable

from .._errors import UnknownToolError, UserError
from ._definition import ToolDefinition
from ._function import FunctionTool
from ._result import ToolResult

__all__ = ("Tool", "ToolRegistry", "ToolsLike", "ValidatingTool")


@runtime_checkable
class Tool(Protocol):
    """Anything that exposes tool functions: one (`FunctionTool`) or several (an MCP server).

    ``execute`` returns a `ToolResult`; raising means an infrastructure error (raise `ToolError`
    for a failure with a message meant for the model).
    """

    def definitions(self) -> Sequence[ToolDefinition]:
        """The functions this tool offers."""
        ...

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call function ``name`` with ``arguments``."""
        ...


@runtime_checkable
class ValidatingTool(Tool, Protocol):
    """A tool that checks literal arguments itself (otherwise its JSON Schema is used)."""

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Problems with ``arguments``, ignoring keys in ``deferred`` (filled in at run time)."""
        ...


ToolLike: TypeAlias = "Tool | Callable[..., Any]"
ToolsLike: TypeAlias = "ToolRegistry | Sequence[Tool | Callable[..., Any]] | Mapping[str, Tool | Callable[..., Any]]"


def _as_tool(obj: Any, name: str | None = None) -> Tool:
    if isinstance(obj, FunctionTool):
        if name is not None and name != obj.name:
            return FunctionTool(
                obj.function,
                name=name,
                description=obj.definition.description,
                annotations=obj.definition.annotations,
            )
        return obj
    if isinstance(obj, Tool):
        if name is not None:
            raise UserError(f"Cannot rename a multi-function tool to {name!r}; register it in a list instead.")
        return obj
    if callable(obj):
        return FunctionTool(obj, name=name)
    raise UserError(
        f"Expected a tool, got {type(obj).__name__}: pass typed functions, @tool objects, Tool "
        "implementations, a list or dict of them, or a ToolRegistry."
    )


def _validates(obj: Tool) -> TypeGuard[ValidatingTool]:
    # A runtime Protocol isinstance check is slow; a FunctionTool always validates.
    return isinstance(obj, (FunctionTool, ValidatingTool))  # checked in this order


class ToolRegistry:
    """The set of tool functions a plan or an agent may call, by name."""

    __slots__ = ("_checkers", "_definitions", "_owners", "_validators")

    def __init__(self, tools: ToolsLike | None = None) -> None:
        self._owners: dict[str, Tool] = {}
        self._definitions: dict[str, ToolDefinition] = {}
        self._validators: dict[str, Any] = {}  # JSON Schema validators, built on first use
        # The tool's own argument check, if it has one (a Protocol isinstance check is slow: do it once).
        self._checkers: dict[str, Any] = {}
        if tools is not None:
            self.add_all(tools)

    @classmethod
    def of(cls, tools: ToolsLike) -> ToolRegistry:
        """``tools`` as a registry (the same object when it already is one)."""
        return tools if isinstance(tools, ToolRegistry) else cls(tools)

    def add(self, tool: Tool | Callable[..., Any], *, name: str | None = None) -> None:
        """Register a tool (or a plain typed function). Names must be unique."""
        obj = _as_tool(tool, name)
        for definition in obj.definitions():
            if definition.name in self._owners:
                raise UserError(
                    f"Duplicate tool name {definition.name!r}: every tool function needs a unique name "
                    "(pass name=... to @tool to rename one)."
                )
            self._owners[definition.name] = obj
            self._definitions[definition.name] = definition
            self._checkers[definition.name] = obj.argument_problems if _validates(obj) else None

    def add_all(self, tools: ToolsLike) -> None:
        """Register every tool of a list, dict (keys are names) or registry."""
        if isinstance(tools, ToolRegistry):
            for name, owner in tools._owners.items():
                self._owners[name] = owner
                self._definitions[name] = tools._definitions[name]
                self._checkers[name] = tools._checkers[name]
        elif not isinstance(tools, (list, tuple)) and isinstance(tools, Mapping):  # (lists skip the abc checks)
            for name, obj in tools.items():
                self.add(obj, name=name)
        else:
            items: Any = tools
            if not isinstance(items, (list, tuple, Sequence)):  # a single tool passed where a list was expected
                items = [items]
            for obj in items:
                self.add(obj)

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[str]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    @property
    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._definitions)

    def get(self, name: str) -> ToolDefinition | None:
        """The definition of ``name``, or None."""
        return self._definitions.get(name)

    def owner(self, name: str) -> Tool | None:
        """The tool object that implements function ``name``, or None."""
        return self._owners.get(name)

    def definition(self, name: str) -> ToolDefinition:
        """The definition of ``name``; raises `UnknownToolError`."""
        try:
            return self._definitions[name]
        except KeyError:
            raise UnknownToolError(name, self.names) from None

    def definitions(self) -> list[ToolDefinition]:
        """Every definition, for the model."""
        return list(self._definitions.values())

    def without(self, *names: str) -> ToolRegistry:
        """A copy of this registry without the named functions."""
        out = ToolRegistry()
        for name, owner in self._owners.items():
            if name not in names:
                out._owners[name] = owner
                out._definitions[name] = self._definitions[name]
                out._checkers[name] = self._checkers[name]
        return out

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call tool ``name``; raises `UnknownToolError` when it is not registered."""
        owner = self._owners.get(name)
        if owner is None:
            raise UnknownToolError(name, self.names)
        return await owner.execute(name, arguments)

    def argument_problems(
        self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str] = frozenset()
    ) -> list[str]:
        """Problems with the literal ``arguments`` for ``name``.

        Keys in ``deferred`` hold references, filled in at run time: they are not checked now.
        """
        if name not in self._owners:
            return [str(UnknownToolError(name, self.names))]
        if deferred:
            arguments = (
                {} if deferred.issuperset(arguments) else {k: v for k, v in arguments.items() if k not in deferred}
            )
        checker = self._checkers[name]
        if checker is not None:
            problems: list[str] = checker(name, arguments, deferred)
            return problems
        return self._schema_problems(name, arguments, deferred)

    def _schema_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        import jsonschema

        validator = self._validators.get(name)
        if validator is None:
            schema = dict(self._definitions[name].parameters_json_schema)
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = self._validators[name] = cls(schema)
        problems: list[str] = []
        for err in validator.iter_errors(dict(arguments)):
            path = list(err.absolute_path)
            if path and path[0] in deferred:
                continue
            if err.validator == "required" and any(f"'{d}'" in err.message for d in deferred):
                continue
            where = ".".join(str(p) for p in path)
            problems.append(f"argument {where!r}: {err.message}" if where else err.message)
        return problems
