from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, cast, get_type_hints, overload

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from typing_extensions import Unpack

from .._errors import InvalidArgumentsError, ToolOutputError, UserError
from .._records import maker
from .._threads import run_in_thread
from ._context import is_run_context, make_run_context
from ._definition import OneDefinition, ToolAnnotations, ToolDefinition
from ._result import ToolResult

__all__ = ("FunctionTool", "tool", "to_jsonable", "wrap_output")

# The decorated function's own type, e.g. ``(item: str) -> int``. One covariant parameter rather
# than ``[P, R]`` with a ParamSpec: that class would be invariant in P, so mypy would type a list of
# different tools as ``list[object]``, which no function taking tools accepts.
FunctionT = TypeVar("FunctionT", covariant=True)
Fn = TypeVar("Fn", bound=Callable[..., Any])

TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)  # exactly these types: already JSON as they are
_new_tool_result = maker(ToolResult)  # a result per call: cheaper than calling the class


def to_jsonable(value: Any) -> Any:
    """Turn a tool's return value into JSON data (models, dataclasses, dates ... become plain)."""
    if isinstance(value, _PLAIN):
        return value
    return pydantic_core.to_jsonable_python(value, fallback=str)


def _strip_titles(schema: Any) -> Any:
    # pydantic adds a "title" to every schema; models do not need them and they cost tokens.
    if isinstance(schema, dict):
        items = cast(dict[str, Any], schema).items()
        return {k: _strip_titles(v) for k, v in items if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


_SECTION_RE = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_RE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        m = _SECTION_RE.match(line)
        if m:
            section, current, arg_indent = m.group(1), None, None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            am = _ARG_RE.match(line)
            if am and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = am.group(1).lstrip("*")
                params[current] = am.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


class FunctionTool(OneDefinition, Generic[FunctionT]):
    """A tool made from one typed Python function (sync or async). Build it with `@tool`.

    It stays that function: calling it calls the function with the same arguments and returns what
    the function returns (a coroutine for an async function), with no validation, and type checkers
    see the function's own signature. Plans and agents call it through `execute`, which validates
    the arguments and wraps the output in a `ToolResult`.
    """

    __slots__ = (
        "_adapters",
        "_call",
        "_context_parameter",
        "_fields",
        "_is_async",
        "_model",
        "_required",
        "_validate",
        "definition",
        "function",
        "strict",
    )

    function: FunctionT

    def __init__(
        self,
        function: FunctionT,
        *,
        name: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        strict: bool = False,
    ) -> None:
        if isinstance(function, FunctionTool):  # a tool of a tool: the same function
            function = cast("FunctionTool[FunctionT]", function).function
        if not callable(function):
            raise UserError(f"@tool needs a function, got {type(function).__name__}.")
        tool_name: str = name or str(getattr(function, "__name__", ""))
        if not TOOL_NAME_RE.fullmatch(tool_name):
            raise UserError(
                f"Invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' "
                "(pass name=... to @tool to choose another)."
            )
        self.function = function
        self.strict = strict
        self._call = cast(Callable[..., Any], function)  # the same function, called with validated keywords
        # A first parameter typed RunContext[...] is filled in by toolplan, not by the model: found
        # once here, so a call of a tool without one costs nothing more.
        self._context_parameter = _context_parameter(function, tool_name)
        if self._context_parameter is not None:
            self._call = _with_run_context(self._call)
        self._is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )
        doc_description, param_docs = _parse_docstring(inspect.getdoc(function) or "")
        self._model = _build_arguments_model(function, tool_name, param_docs, skip=self._context_parameter)
        self._adapters: dict[str, TypeAdapter[Any]] = {}  # per-parameter validators, made on first use
        # The model's core validator, called directly: ``model_validate`` adds Python-level overhead per call.
        self._validate: Callable[[Any], BaseModel] = (
            _strict_validator(self._model) if strict else self._model.__pydantic_validator__.validate_python
        )
        self._fields = self._model.model_fields
        self._required = tuple(k for k, f in self._fields.items() if f.is_required())  # in field order
        parameters = _strip_titles(self._model.model_json_schema())
        parameters.setdefault("properties", {})
        self.definition = ToolDefinition(
            name=tool_name,
            description=description if description is not None else doc_description,
            parameters_json_schema=parameters,
            output_json_schema=_output_schema(function),
            annotations=annotations or ToolAnnotations(),
        )

    def validate_arguments(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate (and coerce) arguments; raise `ToolError` naming every bad field."""
        try:
            model = self._validate(arguments)
        except pydantic.ValidationError as exc:
            raise self._invalid(exc) from None
        return dict(model.__dict__)  # the validated fields (extra fields are forbidden)

    def _invalid(self, exc: pydantic.ValidationError) -> InvalidArgumentsError:
        return InvalidArgumentsError(_describe_validation_error(self.name, exc), tool=self.name)

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Problems with the literal ``arguments``; keys in ``deferred`` are filled in later (references)."""
        if not deferred:
            try:
                self._validate(arguments)
            except pydantic.ValidationError as exc:
                return [_describe_error(err) for err in exc.errors(include_url=False)]
            return []
        # Some values are only known at run time: check the others field by field (validating the
        # whole model would raise, and raising is the slow path in pydantic).
        fields = self._fields
        if not arguments and deferred.issuperset(self._required):
            return []  # every argument is a reference, and every required one is given
        problems: list[str] = []
        for key, value in arguments.items():
            if key not in fields:
                problems.append(f"unexpected argument {key!r}")
                continue
            try:
                _validate_value(self._field_adapter(key), value, self.strict)
            except pydantic.ValidationError as exc:
                problems += [_describe_error({**e, "loc": (key, *e["loc"])}) for e in exc.errors(include_url=False)]
        for key in self._required:
            if key not in arguments and key not in deferred:
                problems.append(f"missing required argument {key!r}")
        return problems

    def _field_adapter(self, key: str) -> TypeAdapter[Any]:
        adapter = self._adapters.get(key)
        if adapter is None:
            config = ConfigDict(strict=True) if self.strict else None
            adapter = self._adapters[key] = TypeAdapter(self._fields[key].rebuild_annotation(), config=config)
        return adapter

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Validate the arguments, call the function, and wrap what it returns."""
        try:
            kwargs = self._validate(arguments).__dict__
        except pydantic.ValidationError as exc:
            raise self._invalid(exc) from None
        if self._is_async:
            value = await self._call(**kwargs)
        else:
            value = await run_in_thread(self._call, **kwargs)
        if type(value) in _PLAIN_TYPES:  # already JSON: the common case
            return _new_tool_result(value)
        return wrap_output(self.name, value)

    if TYPE_CHECKING:
        # For type checkers, calling the tool is calling the function: its signature, its return type.
        @property
        def __call__(self) -> FunctionT:
            """Call the function itself: same arguments, same return value, no validation."""
            ...

    else:

        def __call__(self, /, *args, **kwargs):
            """Call the function itself: same arguments, same return value, no validation."""
            return self.function(*args, **kwargs)

    @property
    def __wrapped__(self) -> FunctionT:
        # `inspect.signature(tool)` follows this to the function's own signature.
        return self.function

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


def wrap_output(tool_name: str, value: Any) -> ToolResult:
    """What a tool function returned, as a `ToolResult` of new JSON data (nothing the function keeps)."""
    if type(value) in _PLAIN_TYPES:
        return _new_tool_result(value)
    try:
        if isinstance(value, ToolResult):
            return ToolResult(to_jsonable(value.content), value.error)
        return _new_tool_result(to_jsonable(value))
    except UnicodeDecodeError:
        raise _binary_output(tool_name, value) from None


def _strict_validator(model: type[BaseModel]) -> Callable[[Any], BaseModel]:
    """Validation in pydantic's strict mode, as for JSON input: ``"5"`` is no int, ``"2025-01-01"`` is a date.

    Arguments arrive as JSON data, so they are checked as JSON (where a date can only be a string);
    values JSON cannot hold (a tuple from code mode, say) are checked as Python values.
    """
    validator = model.__pydantic_validator__

    def validate(arguments: Any) -> BaseModel:
        try:
            data = pydantic_core.to_json(arguments)
        except pydantic_core.PydanticSerializationError:
            return cast(BaseModel, validator.validate_python(arguments, strict=True))
        return cast(BaseModel, validator.validate_json(data, strict=True))

    return validate


def _validate_value(adapter: TypeAdapter[Any], value: Any, strict: bool) -> None:
    if not strict:
        adapter.validate_python(value)
        return
    try:
        data = pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError:
        adapter.validate_python(value, strict=True)
        return
    adapter.validate_json(data, strict=True)


_MAX_SEARCH_NODES = 10_000  # how much of an output `_find_binary` looks through (output is hostile input)
_MAX_SEARCH_DEPTH = 32


def _find_binary(value: Any) -> tuple[str, bytes | bytearray] | None:
    """Where in ``value`` the first bytes that are not UTF-8 sit (``output['a'][0]``); bounded search."""
    stack: list[tuple[str, Any, int]] = [("output", value, 0)]
    seen = 0
    while stack and seen < _MAX_SEARCH_NODES:
        path, node, depth = stack.pop()
        seen += 1
        if isinstance(node, (bytes, bytearray)):
            try:
                node.decode()
            except UnicodeDecodeError:
                return path, node
            continue
        if depth >= _MAX_SEARCH_DEPTH:
            continue
        if isinstance(node, ToolResult):
            stack.append((path, node.content, depth + 1))
        elif isinstance(node, Mapping):
            items = list(islice(node.items(), _MAX_SEARCH_NODES))
            for key, item in reversed(items):
                stack.append((f"{path}[{key!r}]", item, depth + 1))
                stack.append((f"a key of {path}", key, depth + 1))
        elif isinstance(node, (list, tuple)):
            elements: list[Any] = list(islice(node, _MAX_SEARCH_NODES))
            stack.extend((f"{path}[{i}]", item, depth + 1) for i, item in reversed(list(enumerate(elements))))
    return None


def _binary_output(tool_name: str, value: Any) -> ToolOutputError:
    """The error for an output holding bytes that are not UTF-8 text (JSON has no bytes)."""
    found = _find_binary(value)
    if found is None:
        what = "a value holding bytes that are not UTF-8 text"
    else:
        path, data = found
        preview = repr(bytes(data[:16])) + ("..." if len(data) > 16 else "")
        where = "" if path == "output" else f" at {path}"
        size = f"{len(data)} byte{'s' if len(data) != 1 else ''}"
        what = f"{size} that are not UTF-8 text ({preview}){where}"
    return ToolOutputError(
        f"Tool {tool_name!r} returned {what}; a tool's output must be JSON data. Return str for text, "
        "or encode binary data as text, e.g. base64.b64encode(data).decode('ascii').",
        tool=tool_name,
    )


def _signature(function: Callable[..., Any], tool_name: str) -> tuple[inspect.Signature, dict[str, Any]]:
    try:
        return inspect.signature(function), get_type_hints(function, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise UserError(f"Cannot read the signature of tool {tool_name!r}: {exc}") from None


def _context_parameter(function: Callable[..., Any], tool_name: str) -> str | None:
    """The name of the first parameter if it is typed ``RunContext[...]``; a `UserError` if a later one is."""
    signature, hints = _signature(function, tool_name)
    found: str | None = None
    for position, param in enumerate(signature.parameters.values()):
        if not is_run_context(_strip_annotated(hints.get(param.name))):
            continue
        if position != 0 or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.KEYWORD_ONLY):
            raise UserError(
                f"Tool {tool_name!r}: parameter {param.name!r} is typed RunContext but is not the first "
                "positional parameter. Make it the first parameter (ctx: RunContext[MyDeps], ...)."
            )
        found = param.name
    return found


def _strip_annotated(annotation: Any) -> Any:
    # ``Annotated[RunContext[D], ...]`` counts as ``RunContext[D]``.
    return getattr(annotation, "__origin__", annotation) if hasattr(annotation, "__metadata__") else annotation


def _with_run_context(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` with a `RunContext` built at call time as its first argument.

    For a sync tool it runs in the tool's thread, whose context is a copy of the caller's, so the
    call context and the run's dependencies are the ones of this call.
    """

    def call_with_context(**kwargs: Any) -> Any:
        return call(make_run_context(), **kwargs)

    return call_with_context


def _build_arguments_model(
    function: Callable[..., Any], tool_name: str, param_docs: Mapping[str, str], *, skip: str | None = None
) -> type[BaseModel]:
    signature, hints = _signature(function, tool_name)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.name == skip:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"Tool {tool_name!r} takes *{param.name}: tools need named, typed parameters "
                "so the model can be given a schema. Replace it with explicit parameters."
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise UserError(
                f"Tool {tool_name!r}: parameter {param.name!r} is positional-only; tools are called by name."
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        doc = param_docs.get(param.name)
        fields[param.name] = (annotation, Field(default, description=doc) if doc else default)
    model = create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    return cast(type[BaseModel], model)


def _output_schema(function: Callable[..., Any]) -> dict[str, Any] | None:
    try:
        ret = get_type_hints(function, include_extras=True).get("return")
    except (TypeError, NameError):
        return None
    if ret is None or ret is Any or ret is ToolResult or ret is type(None):
        return None
    if inspect.iscoroutinefunction(function) and getattr(ret, "__origin__", None) is Awaitable:
        return None
    try:
        return cast(dict[str, Any], _strip_titles(TypeAdapter(ret).json_schema()))
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        # The return type has no JSON Schema (an arbitrary class): the tool still works, the
        # model just is not told the output's shape.
        return None


def _describe_error(err: Any) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
    if err["type"] == "missing":
        return f"missing required argument {loc!r}"
    if err["type"] == "extra_forbidden":
        return f"unexpected argument {loc!r}"
    return f"argument {loc!r}: {err['msg']} (got {err.get('input')!r})"


def _describe_validation_error(tool_name: str, exc: pydantic.ValidationError) -> str:
    problems = "; ".join(_describe_error(e) for e in exc.errors(include_url=False))
    return f"Invalid arguments for tool {tool_name!r}: {problems}. Call it again with arguments matching its schema."


class _ToolOptions(TypedDict, total=False):
    """The options of `tool` (for its overload; documented there and in `ToolAnnotations`)."""

    name: str | None
    description: str | None
    read_only: bool
    idempotent: bool
    destructive: bool
    cost: float
    timeout: float | None
    retry: int | None
    concurrency: int | None
    general: bool
    resource: str | None
    cost_of: Callable[[Mapping[str, Any]], float] | None
    share_calls: bool
    strict: bool


@overload
def tool(function: Fn, /) -> FunctionTool[Fn]: ...


@overload
def tool(**options: Unpack[_ToolOptions]) -> Callable[[Fn], FunctionTool[Fn]]: ...


def tool(
    function: Fn | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    destructive: bool = False,
    cost: float = 1.0,
    timeout: float | None = None,
    retry: int | None = None,
    concurrency: int | None = None,
    general: bool = False,
    resource: str | None = None,
    cost_of: Callable[[Mapping[str, Any]], float] | None = None,
    share_calls: bool = True,
    strict: bool = False,
) -> FunctionTool[Fn] | Callable[[Fn], FunctionTool[Fn]]:
    """Turn a typed function (sync or async) into a tool.

    The name is the function's name, the description its docstring (Google-style ``Args:`` become
    parameter descriptions), the parameter schema comes from the type hints and the output schema
    from the return annotation.

    Arguments are validated by pydantic in its default (lax) mode, as pydantic-ai does: a value
    that means the same thing is accepted (``"5"`` for an ``int``, ``1`` for a ``float``, an ISO
    string for a ``date``). With ``strict=True`` they are validated in pydantic's strict mode, as
    JSON: ``"5"`` is refused for an ``int`` and the call fails with ``invalid_arguments``.

    Use bare (``@tool``) or with options (``@tool(idempotent=True, timeout=5)``); see
    `ToolAnnotations` for what each option means. The result is still the function: calling it
    calls the function (see `FunctionTool`).
    """
    annotations = ToolAnnotations(
        read_only=read_only,
        idempotent=idempotent,
        destructive=destructive,
        cost=cost,
        timeout=timeout,
        retry=retry,
        concurrency=concurrency,
        general=general,
        resource=resource,
        cost_of=cost_of,
        share_calls=share_calls,
    )

    def decorate(fn: Fn) -> FunctionTool[Fn]:
        return FunctionTool(fn, name=name, description=description, annotations=annotations, strict=strict)

    if function is not None:
        return decorate(function)
    return decorate
