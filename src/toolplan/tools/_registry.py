from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeGuard, runtime_checkable

from .._errors import UnknownToolError, UserError
from ._definition import ToolDefinition
from ._foreign import foreign_tool
from ._function import FunctionTool
from ._group import ToolGroup, make_group
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
    if (adapted := foreign_tool(obj, name)) is not None:  # a LangChain, Agents SDK or pydantic-ai tool
        return adapted
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

    __slots__ = ("_checkers", "_definitions", "_groups", "_owners", "_validators")

    def __init__(self, tools: ToolsLike | None = None) -> None:
        self._owners: dict[str, Tool] = {}
        self._definitions: dict[str, ToolDefinition] = {}
        self._groups: dict[str, ToolGroup] = {}  # groups of alternatives, by name (their definitions are above)
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
            if definition.name in self._definitions:
                raise UserError(
                    f"Duplicate tool name {definition.name!r}: every tool function needs a unique name "
                    "(pass name=... to @tool to rename one)."
                )
            self._owners[definition.name] = obj
            self._definitions[definition.name] = definition
            self._checkers[definition.name] = obj.argument_problems if _validates(obj) else None

    def add_group(
        self,
        name: str,
        members: Sequence[str],
        *,
        description: str | None = None,
        hide_members: bool = True,
    ) -> ToolGroup:
        """Register ``members`` as interchangeable alternatives callable as ``name``.

        A call of ``name`` (a plan step, a model's direct call, ``call_tool`` in code) runs one
        member, chosen when it is dispatched by the run's policy (`toolplan.policy.ToolPolicy`;
        without one, the member marked ``general``, else the first). The model sees one tool,
        ``name``, with the general (or first) member's parameters; with ``hide_members`` the members
        are not offered on their own, though plans may still name them.

        Raises:
            UserError: a member is not registered, the members do not share a safety class, one is
                destructive, two are marked general, or ``name`` is taken.
        """
        if name in self._definitions:
            raise UserError(f"Duplicate tool name {name!r}: a group needs a name no tool or group has.")
        group = make_group(name, members, self._definitions, description=description, hide_members=hide_members)
        self._groups[name] = group
        self._definitions[name] = group.definition
        self._checkers[name] = None
        return group

    def group(self, name: str) -> ToolGroup | None:
        """The group of alternatives called ``name``, or None."""
        return self._groups.get(name) if self._groups else None

    @property
    def groups(self) -> list[ToolGroup]:
        """Every group of alternatives, in registration order."""
        return list(self._groups.values())

    def add_all(self, tools: ToolsLike) -> None:
        """Register every tool of a list, dict (keys are names) or registry."""
        if isinstance(tools, ToolRegistry):
            for name, owner in tools._owners.items():
                self._owners[name] = owner
                self._definitions[name] = tools._definitions[name]
                self._checkers[name] = tools._checkers[name]
            for name, group in tools._groups.items():
                self._groups[name] = group
                self._definitions[name] = group.definition
                self._checkers[name] = None
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
        """Registered tool names (groups included), in registration order."""
        return list(self._definitions)

    def get(self, name: str) -> ToolDefinition | None:
        """The definition of ``name``, or None."""
        return self._definitions.get(name)

    def owner(self, name: str) -> Tool | None:
        """The tool object that implements function ``name``, or None (also for a group)."""
        return self._owners.get(name)

    def definition(self, name: str) -> ToolDefinition:
        """The definition of ``name``; raises `UnknownToolError`."""
        try:
            return self._definitions[name]
        except KeyError:
            raise UnknownToolError(name, self.names) from None

    def definitions(self) -> list[ToolDefinition]:
        """Every definition, for the model (a group's hidden members left out)."""
        if not self._groups:
            return list(self._definitions.values())
        hidden = {m for g in self._groups.values() if g.hide_members for m in g.members}
        return [d for name, d in self._definitions.items() if name not in hidden]

    def without(self, *names: str) -> ToolRegistry:
        """A copy of this registry without the named functions (and the groups that name one)."""
        out = ToolRegistry()
        for name, owner in self._owners.items():
            if name not in names:
                out._owners[name] = owner
                out._definitions[name] = self._definitions[name]
                out._checkers[name] = self._checkers[name]
        for name, group in self._groups.items():
            if name not in names and not names_any(group.members, names):
                out._groups[name] = group
                out._definitions[name] = group.definition
                out._checkers[name] = None
        return out

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call tool ``name`` (a group: its general member, else its first); raises `UnknownToolError`."""
        owner = self._owners.get(name)
        if owner is None:
            group = self.group(name)
            if group is None:
                raise UnknownToolError(name, self.names)
            name = group.default
            owner = self._owners[name]
        return await owner.execute(name, arguments)

    def argument_problems(
        self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str] = frozenset()
    ) -> list[str]:
        """Problems with the literal ``arguments`` for ``name``.

        Keys in ``deferred`` hold references, filled in at run time: they are not checked now.
        """
        if name not in self._owners:
            group = self.group(name)
            if group is None:
                return [str(UnknownToolError(name, self.names))]
            return self.alternatives_problems(group.members, arguments, deferred)
        if deferred:
            arguments = (
                {} if deferred.issuperset(arguments) else {k: v for k, v in arguments.items() if k not in deferred}
            )
        checker = self._checkers[name]
        if checker is not None:
            problems: list[str] = checker(name, arguments, deferred)
            return problems
        return self._schema_problems(name, arguments, deferred)

    def alternatives_problems(
        self, members: Sequence[str], arguments: Mapping[str, Any], deferred: frozenset[str] = frozenset()
    ) -> list[str]:
        """Problems with ``arguments`` for any of ``members``: each alternative must accept them."""
        return [
            f"for alternative {member!r}, {problem}"
            for member in members
            for problem in self.argument_problems(member, arguments, deferred)
        ]

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


def schema_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
    """Problems with ``arguments`` under the JSON Schema ``schema`` (keys in ``deferred`` unchecked)."""
    registry = ToolRegistry()
    registry._definitions["_"] = ToolDefinition(name="_", parameters_json_schema=schema)
    return registry._schema_problems("_", {k: v for k, v in arguments.items() if k not in deferred}, deferred)


def names_any(members: Sequence[str], names: Sequence[str]) -> bool:
    """True when one of ``members`` is in ``names``."""
    return any(m in names for m in members)
