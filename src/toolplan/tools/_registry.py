from __future__ import annotations

import dataclasses
import re
from abc import ABCMeta
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeGuard, runtime_checkable

from .._errors import InvalidArgumentsError, UnknownToolError, UserError
from ._definition import ToolAnnotations, ToolDefinition
from ._foreign import foreign_tool
from ._function import FunctionTool
from ._group import ToolGroup, make_group
from ._result import ToolResult, owned
from ._schema import SchemaCheck, check_for, invalid_message, normalize_schema
from ._schema_tool import SchemaTool
from ._search import note_loaded

__all__ = ("Tool", "ToolRegistry", "ToolsLike", "ValidatingTool")


if TYPE_CHECKING:
    _ProtocolType = ABCMeta
else:
    _ProtocolType = type(Protocol)


class _ToolType(_ProtocolType):
    # Constructors live on the metaclass: a method in the Protocol's body would become a member
    # every tool object must have.

    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | None,
        function: Callable[..., Any],
        *,
        output_schema: Mapping[str, Any] | None = None,
        annotations: ToolAnnotations | None = None,
        strict: bool = False,
    ) -> SchemaTool:
        """A tool from a JSON Schema of its parameters and a function (sync or async).

        The function is called with the arguments as keyword arguments (write ``def f(**arguments)``
        to get them as one dict). ``parameters`` may be written in a common dialect (``"dict"``,
        ``"float"``, OpenAI 3.0 ``nullable``, older drafts): it is normalised to JSON Schema 2020-12
        now, and the tool's ``schema_notes`` say what was rewritten. Every call is checked against it
        before the function runs. With ``strict=True``, arguments the schema does not name are refused.

        Raises:
            UserError: the name is not 1-64 letters, digits, '_' or '-', or ``function`` is not callable.
            InvalidToolSchemaError: the schema cannot be used (the message names where in it).
        """
        return SchemaTool(
            name,
            description,
            parameters,
            function,
            output_schema=output_schema,
            annotations=annotations,
            strict=strict,
        )


@runtime_checkable
class Tool(Protocol, metaclass=_ToolType):
    """Anything that exposes tool functions: one (`FunctionTool`) or several (an MCP server).

    ``execute`` returns a `ToolResult`; raising means an infrastructure error (raise `ToolError`
    for a failure with a message meant for the model). ``Tool.from_schema(...)`` makes one from a
    JSON Schema and a function.

    A registry checks every call of such a tool against its definition's schema before ``execute``
    runs, and copies what ``execute`` returns (the tool may keep and change its own objects).
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


# @tool's names, with an optional "namespace:" in front (skills are "skill:NAME").
_REGISTERED_NAME = re.compile(r"(?:[A-Za-z0-9_-]+:)?[A-Za-z0-9_-]+")

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
                strict=obj.strict,
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


def self_checked(owner: Tool, name: str) -> bool:
    """True when ``owner``'s ``execute`` of ``name`` validates the arguments and returns new JSON data.

    `FunctionTool` and `SchemaTool` do, and so does a `Toolset` function made of one (read from its
    ``_functions``: the toolset class is in a package that imports this one).
    """
    if isinstance(owner, (FunctionTool, SchemaTool)):
        return True
    functions = getattr(owner, "_functions", None)
    return isinstance(functions, dict) and isinstance(functions.get(name), (FunctionTool, SchemaTool))


def _validates(obj: Tool) -> TypeGuard[ValidatingTool]:
    # A runtime Protocol isinstance check is slow; a FunctionTool always validates.
    return isinstance(obj, (FunctionTool, ValidatingTool))  # checked in this order


class ToolRegistry:
    """The set of tool functions a plan or an agent may call, by name.

    Attributes:
        default_policy: What chooses among alternative tools for runs on this registry that were
            given no policy when their plan names a strategy (``"policy": "thompson"``): a
            `toolplan.policy.ToolPolicy` made on first use and kept here, so that every such run on
            this registry learns from the ones before. Set your own (a seeded one, one with a store)
            to configure it. None until then.
    """

    __slots__ = ("_checkers", "_deferred", "_definitions", "_dispatch", "_groups", "_owners", "default_policy")

    def __init__(self, tools: ToolsLike | None = None) -> None:
        self._owners: dict[str, Tool] = {}
        self._definitions: dict[str, ToolDefinition] = {}
        self._groups: dict[str, ToolGroup] = {}  # groups of alternatives, by name (their definitions are above)
        # The schema check a call needs before the tool's ``execute`` (None: the tool checks calls
        # itself and returns new data), compiled when the tool is added.
        self._dispatch: dict[str, SchemaCheck | None] = {}
        # The tool's own argument check, if it has one (a Protocol isinstance check is slow: do it once).
        self._checkers: dict[str, Any] = {}
        self.default_policy: Any = None  # a ToolChooser (toolplan.execute), made on first use
        # Functions the model does not see until it finds them with search_tools (or names one).
        self._deferred: set[str] = set()
        if tools is not None:
            self.add_all(tools)

    @classmethod
    def of(cls, tools: ToolsLike) -> ToolRegistry:
        """``tools`` as a registry (the same object when it already is one)."""
        return tools if isinstance(tools, ToolRegistry) else cls(tools)

    def add(self, tool: Tool | Callable[..., Any], *, name: str | None = None, deferred: bool | None = None) -> None:
        """Register a tool (or a plain typed function). Names must be unique.

        With ``deferred=True`` (default: the tool's own ``deferred`` attribute, as `Toolset`,
        `MCPToolset` and `OpenAPIToolset` have), its functions are left out of `definitions`: an
        agent offers ``search_tools`` to find them, and a plan or call that names one loads it.
        """
        obj = _as_tool(tool, name)
        if deferred is None:
            deferred = getattr(obj, "deferred", False) is True
        added: list[tuple[ToolDefinition, SchemaCheck | None]] = []
        for definition in obj.definitions():
            if definition.name in self._definitions or any(d.name == definition.name for d, _ in added):
                raise UserError(
                    f"Duplicate tool name {definition.name!r}: every tool function needs a unique name "
                    "(pass name=... to @tool to rename one)."
                )
            check: SchemaCheck | None = None
            name_ok = isinstance(definition.name, str) and len(definition.name) <= 64
            if not (name_ok and _REGISTERED_NAME.fullmatch(definition.name)):
                raise UserError(
                    f"Invalid tool name {definition.name[:80]!r}: use 1-64 letters, digits, '_' or '-' "
                    "(a 'namespace:' in front is allowed)."
                )
            if not self_checked(obj, definition.name):  # an MCP server's, a foreign or a hand-written tool's
                schema, _notes = normalize_schema(definition.parameters_json_schema, tool=definition.name)
                definition = dataclasses.replace(definition, parameters_json_schema=schema)
                check = SchemaCheck(schema)
            added.append((definition, check))
        for definition, check in added:  # all or nothing
            self._owners[definition.name] = obj
            self._definitions[definition.name] = definition
            self._checkers[definition.name] = obj.argument_problems if _validates(obj) else None
            self._dispatch[definition.name] = check
            if deferred:
                self._deferred.add(definition.name)

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

    def add_all(self, tools: ToolsLike, *, deferred: bool | None = None) -> None:
        """Register every tool of a list, dict (keys are names) or registry.

        ``deferred``: as in `add`, for every one (None: each tool's own, or the registry's marks).
        """
        if isinstance(tools, ToolRegistry):
            for name, owner in tools._owners.items():
                self._owners[name] = owner
                self._definitions[name] = tools._definitions[name]
                self._checkers[name] = tools._checkers[name]
                self._dispatch[name] = tools._dispatch[name]
                if deferred or (deferred is None and name in tools._deferred):
                    self._deferred.add(name)
            for name, group in tools._groups.items():
                self._groups[name] = group
                self._definitions[name] = group.definition
                self._checkers[name] = None
        elif not isinstance(tools, (list, tuple)) and isinstance(tools, Mapping):  # (lists skip the abc checks)
            for name, obj in tools.items():
                self.add(obj, name=name, deferred=deferred)
        else:
            items: Any = tools
            if not isinstance(items, (list, tuple, Sequence)):  # a single tool passed where a list was expected
                items = [items]
            for obj in items:
                self.add(obj, deferred=deferred)

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
        """The tool object that implements function ``name``, or None (also for a group).

        A deferred function looked up here is loaded for the current agent run.
        """
        if self._deferred and name in self._deferred:
            note_loaded(name)
        return self._owners.get(name)

    @property
    def deferred_names(self) -> list[str]:
        """The deferred functions (found with ``search_tools``), in registration order."""
        return [n for n in self._definitions if n in self._deferred] if self._deferred else []

    def is_deferred(self, name: str) -> bool:
        """True when function ``name`` is deferred."""
        return name in self._deferred

    def deferred_definitions(self) -> list[ToolDefinition]:
        """The definitions of the deferred functions, in registration order."""
        return [self._definitions[n] for n in self.deferred_names]

    @property
    def visible_names(self) -> list[str]:
        """The names the model sees up front: every name but the deferred ones (groups included)."""
        return [n for n in self._definitions if n not in self._deferred] if self._deferred else self.names

    def dispatch_check(self, name: str) -> SchemaCheck | None:
        """The schema check a call of function ``name`` needs before its tool's ``execute``, or None.

        None for a tool that checks its calls itself (`FunctionTool`, `SchemaTool`) and for names
        that are not tool functions.
        """
        return self._dispatch.get(name)

    def definition(self, name: str) -> ToolDefinition:
        """The definition of ``name``; raises `UnknownToolError`."""
        try:
            return self._definitions[name]
        except KeyError:
            raise UnknownToolError(name, self.names) from None

    def definitions(self) -> list[ToolDefinition]:
        """Every definition, for the model (a group's hidden members and deferred functions left out)."""
        if not self._groups and not self._deferred:
            return list(self._definitions.values())
        hidden = {m for g in self._groups.values() if g.hide_members for m in g.members} | self._deferred
        return [d for name, d in self._definitions.items() if name not in hidden]

    def without(self, *names: str) -> ToolRegistry:
        """A copy of this registry without the named functions (and the groups that name one)."""
        out = ToolRegistry()
        for name, owner in self._owners.items():
            if name not in names:
                out._owners[name] = owner
                out._definitions[name] = self._definitions[name]
                out._checkers[name] = self._checkers[name]
                out._dispatch[name] = self._dispatch[name]
                if name in self._deferred:
                    out._deferred.add(name)
        for name, group in self._groups.items():
            if name not in names and not names_any(group.members, names):
                out._groups[name] = group
                out._definitions[name] = group.definition
                out._checkers[name] = None
        return out

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call tool ``name`` (a group: its general member, else its first); raises `UnknownToolError`.

        The arguments are checked against the function's schema first (`InvalidArgumentsError`).
        """
        owner = self._owners.get(name)
        if owner is None:
            group = self.group(name)
            if group is None:
                raise UnknownToolError(name, self.names)
            name = group.default
            owner = self._owners[name]
        check = self._dispatch.get(name)
        if check is None:
            return await owner.execute(name, arguments)
        problem = check.first_problem(arguments)
        if problem is not None:
            raise InvalidArgumentsError(invalid_message(name, problem), tool=name)
        result = await owner.execute(name, arguments)
        return ToolResult(owned(result.content), result.error)

    def argument_problems(
        self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str] = frozenset()
    ) -> list[str]:
        """Problems with the literal ``arguments`` for ``name``.

        Keys in ``deferred`` hold references, filled in at run time: they are not checked now.
        A deferred tool checked here is loaded for the current agent run.
        """
        if self._deferred and name in self._deferred:
            note_loaded(name)
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
        check = self._dispatch.get(name)
        if check is not None:
            return check.problems(arguments, deferred)
        return check_for(self._definitions[name].parameters_json_schema)(arguments, deferred)


def names_any(members: Sequence[str], names: Sequence[str]) -> bool:
    """True when one of ``members`` is in ``names``."""
    return any(m in names for m in members)
