"""`SchemaTool`: a tool made from a JSON Schema and a callable (`Tool.from_schema`), and many from a catalog."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from .._errors import InvalidArgumentsError, UserError
from .._threads import run_in_thread
from ._definition import OneDefinition, ToolAnnotations, ToolDefinition
from ._function import TOOL_NAME_RE, wrap_output
from ._result import ToolResult
from ._schema import SchemaCheck, invalid_message, normalize_schema

__all__ = ("SchemaTool", "schema_tools")


class SchemaTool(OneDefinition):
    """A tool made from a name, a description, a JSON Schema of its parameters and a callable.

    Build it with `Tool.from_schema`. The schema is normalised to JSON Schema 2020-12 when the tool
    is made (`schema_notes` says what was rewritten) and every call is checked against it before
    the function runs: a call that does not match fails with ``invalid_arguments`` and the function
    is not called. Nothing is coerced: JSON Schema decides. What the function returns becomes new
    JSON data (the function may keep and change its own objects: the result does not change).
    """

    __slots__ = ("_call", "_check", "_is_async", "definition", "function", "schema_notes", "strict")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | None,
        function: Callable[..., Any],
        *,
        output_schema: Mapping[str, Any] | None = None,
        annotations: ToolAnnotations | None = None,
        strict: bool = False,
        _call: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name):
            raise UserError(f"Invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'.")
        if not callable(function):
            raise UserError(f"Tool {name!r} needs a function to call, got {type(function).__name__}.")
        if output_schema is not None and not isinstance(output_schema, Mapping):
            raise UserError(f"Tool {name!r}: output_schema must be a JSON object, got {type(output_schema).__name__}.")
        schema, notes = normalize_schema(parameters, strict=strict, tool=name)
        self.function = function
        self.strict = strict
        self.schema_notes: tuple[str, ...] = notes  #: what normalisation rewrote, one line per change
        self._check = SchemaCheck(schema)  # compiled once
        self._call = _call if _call is not None else _keywords(function)
        self._is_async = _is_async(function)
        self.definition = ToolDefinition(
            name=name,
            description=description or "",
            parameters_json_schema=schema,
            output_json_schema=dict(output_schema) if output_schema is not None else None,
            annotations=annotations or ToolAnnotations(),
        )

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Problems with the literal ``arguments``; keys in ``deferred`` are filled in later (references)."""
        return self._check.problems(arguments, deferred)

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Check the arguments against the schema, call the function, and wrap what it returns."""
        problem = self._check.first_problem(arguments)
        if problem is not None:
            raise InvalidArgumentsError(invalid_message(self.name, problem), tool=self.name)
        kwargs = dict(arguments)
        if self._is_async:
            value = await self._call(kwargs)
        else:
            value = await run_in_thread(self._call, kwargs)
            if inspect.isawaitable(value):  # a sync callable that returned a coroutine
                value = await value
        return wrap_output(self.name, value)

    def __repr__(self) -> str:
        return f"SchemaTool({self.name!r})"


def _keywords(function: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    def call(arguments: dict[str, Any]) -> Any:
        return function(**arguments)

    return call


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def _read_definition(item: Any, index: int) -> tuple[str, str, Any]:
    """``(name, description, parameters)`` of one catalog entry in any of the common shapes."""
    if not isinstance(item, Mapping):
        raise UserError(f"Tool definition {index} is a {type(item).__name__}, not a JSON object.")
    entry = cast(Mapping[str, Any], item)
    if isinstance(entry.get("function"), Mapping):  # OpenAI: {"type": "function", "function": {...}}
        entry = cast(Mapping[str, Any], entry["function"])
    name = entry.get("name")
    if not isinstance(name, str):
        raise UserError(f"Tool definition {index} has no 'name' string.")
    for key in ("parameters", "input_schema", "inputSchema"):  # OpenAI, Anthropic, MCP
        if key in entry:
            return name, str(entry.get("description") or ""), entry[key]
    return name, str(entry.get("description") or ""), None


def schema_tools(
    definitions: Iterable[Mapping[str, Any]],
    handler: Callable[[str, dict[str, Any]], Any],
    *,
    prefix: str = "",
    strict: bool = False,
    annotations: ToolAnnotations | Mapping[str, ToolAnnotations] | None = None,
) -> dict[str, SchemaTool]:
    """One `SchemaTool` per definition, by name; each call runs ``handler(name, arguments)``."""
    tools: dict[str, SchemaTool] = {}
    for index, item in enumerate(definitions):
        name, description, parameters = _read_definition(item, index)
        local = prefix + name
        if local in tools:
            raise UserError(f"Two tool definitions are named {local!r}: names must be unique.")
        annotated = annotations.get(name) if isinstance(annotations, Mapping) else annotations
        output = item.get("output_schema") if isinstance(item, Mapping) else None
        tools[local] = SchemaTool(
            local,
            description,
            parameters,
            handler,
            output_schema=output if isinstance(output, Mapping) else None,
            annotations=annotated,
            strict=strict,
            _call=_handled(handler, name),
        )
    return tools


def _handled(handler: Callable[[str, dict[str, Any]], Any], name: str) -> Callable[[dict[str, Any]], Any]:
    def call(arguments: dict[str, Any]) -> Any:
        return handler(name, arguments)

    return call
