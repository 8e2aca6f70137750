"""Reading an OpenAPI 3.0/3.1 document into operations, each with one JSON Schema for its tool.

Pure data work, no network: `parse_spec` walks ``paths``, resolves local ``$ref``s (``#/...``)
with bounds, folds each operation's path, query, header and cookie parameters and its request body
into one object schema, names the operation and says how each argument goes on the wire. An
operation it cannot use is left out with the reason (``skipped``), never a traceback.

Folding rule (documented in docs/openapi.md): arguments are taken in the order path, query,
header, cookie, body; a name already taken gets the suffix ``__<location>`` (a body field ``id``
next to a path parameter ``id`` becomes ``id__body``). A JSON or form body that is an object with
``properties`` gives one argument per property when the body is required (or asks for no field);
any other body is one argument ``body``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

from .._errors import OpenAPISpecError
from ._fetch import _FORBIDDEN_HEADERS, _HEADER_NAME

__all__ = ("MAX_OPERATIONS", "Argument", "Operation", "ParsedSpec", "method_annotations", "parse_spec")

Location = Literal["path", "query", "header", "cookie", "body"]
BodyKind = Literal["json", "form", "text"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_LOCATIONS: tuple[Location, ...] = ("path", "query", "header", "cookie")
MAX_OPERATIONS = 20_000  # operations read from one document
_MAX_SCHEMA_NODES = 20_000  # JSON nodes of one tool's schema after references are resolved
_MAX_DEPTH = 40  # nesting of one tool's schema (objects and arrays) after references are resolved
_MAX_REF_CHAIN = 32  # a $ref pointing at a $ref pointing at ...
_MAX_TEXT = 1_000  # characters of a tool description
_MAX_NAME = 256  # characters of a parameter name
# Headers the document may not describe as parameters (OpenAPI: they come from content and security).
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
# Keywords of OpenAPI schemas that are no JSON Schema (or only documentation): left out of tool schemas.
_DROPPED = frozenset({"example", "examples", "xml", "externalDocs", "discriminator", "$schema", "$id", "$comment"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
     "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema"}
)  # fmt: skip
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_JSON_TYPE = re.compile(r"^application/([\w.+-]*\+)?json\b|^\*/\*$", re.IGNORECASE)
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_TEMPLATE = re.compile(r"\{([^{}/]+)\}")


@dataclass(frozen=True, slots=True)
class Argument:
    """One property of a tool's schema and where its value goes: ``location`` and the ``wire`` name."""

    name: str
    wire: str
    location: Location


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One usable operation: its tool name (before any prefix), request shape and tool schema."""

    name: str
    method: str  # upper case
    path: str
    operation_id: str | None
    tags: tuple[str, ...]
    description: str
    parameters: dict[str, Any]
    arguments: tuple[Argument, ...]
    body: BodyKind | None  # how a body is encoded; None: the operation sends none
    body_argument: str | None  # the argument holding the whole body; None when its fields are arguments
    content_type: str | None
    notes: tuple[str, ...] = ()  # what was simplified (a recursive schema made permissive, say)


@dataclass(slots=True)
class ParsedSpec:
    """What `parse_spec` read: the operations, the server URLs and what was left out (and why)."""

    title: str
    servers: list[str]
    operations: list[Operation] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # "GET /path" -> why


class _Skip(Exception):
    """This operation cannot become a tool (the message says why); the others go on."""


def method_annotations(method: str) -> tuple[bool, bool, bool]:
    """``(read_only, idempotent, destructive)`` of an HTTP method (RFC 9110's safe and idempotent methods)."""
    m = method.upper()
    safe = m in ("GET", "HEAD", "OPTIONS", "TRACE")
    return safe, safe or m in ("PUT", "DELETE"), m == "DELETE"


def parse_spec(
    document: Any, *, include: Iterable[str] | None = None, exclude: Iterable[str] = (), prefix_length: int = 0
) -> ParsedSpec:
    """The operations of an OpenAPI 3.0/3.1 ``document`` (see the module doc).

    Raises:
        OpenAPISpecError: the document is not an OpenAPI 3.0 or 3.1 object with ``paths``.
    """
    if not isinstance(document, Mapping):
        raise OpenAPISpecError(f"An OpenAPI document is a JSON object; got {type(document).__name__}.")
    version = document.get("openapi")
    if not isinstance(version, str) or not re.match(r"3\.[01]\.", version + "."):
        found = f"swagger {document.get('swagger')!r}" if "swagger" in document else f"openapi {version!r}"
        raise OpenAPISpecError(
            f"The document says {found}; OpenAPIToolset reads OpenAPI 3.0 and 3.1. Convert it (for example "
            "with swagger2openapi) or give the 3.x document."
        )
    paths = document.get("paths")
    if not isinstance(paths, Mapping):
        raise OpenAPISpecError("The OpenAPI document has no 'paths' object, so no operation to offer.")
    info = document.get("info")
    title = str(info.get("title", "")) if isinstance(info, Mapping) else ""
    spec = ParsedSpec(title=title[:200], servers=_servers(document.get("servers")))
    reader = _Reader(document, _api_key_places(document))
    selectors_in = None if include is None else list(include)
    selectors_out = list(exclude)
    taken: set[str] = set()
    count = 0
    for path, item in paths.items():
        if not isinstance(path, str) or not path.startswith("/"):
            spec.skipped[f"? {str(path)[:100]}"] = "a path must be a string starting with '/'"
            continue
        try:
            item = reader.deref(item, f"the path item {path!r}")
        except _Skip as exc:
            spec.skipped[f"* {path[:200]}"] = str(exc)
            continue
        if not isinstance(item, Mapping):
            spec.skipped[f"* {path[:200]}"] = "the path item is not an object"
            continue
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            count += 1
            if count > MAX_OPERATIONS:
                raise OpenAPISpecError(
                    f"The OpenAPI document has more than {MAX_OPERATIONS} operations. Split it, or give a document "
                    "with the operations you need."
                )
            label = f"{method.upper()} {path[:200]}"
            if not isinstance(operation, Mapping):
                spec.skipped[label] = "the operation is not an object"
                continue
            operation_id = operation.get("operationId")
            operation_id = operation_id if isinstance(operation_id, str) and operation_id else None
            tags = tuple(str(t) for t in operation.get("tags") or () if isinstance(t, str))
            base = _tool_name(operation_id or f"{method}_{path}", 64 - prefix_length - 4)
            name = _unique(base, taken)
            keys = (operation_id, name, method.upper(), path, tags)
            if selectors_in is not None and not any(_selected(s, *keys) for s in selectors_in):
                continue
            if any(_selected(s, *keys) for s in selectors_out):
                continue
            try:
                built = reader.operation(name, method, path, operation, item.get("parameters"), tags)
            except _Skip as exc:
                spec.skipped[label] = str(exc)
                continue
            taken.add(name)
            spec.operations.append(built)
    return spec


def _selected(
    selector: str, operation_id: str | None, name: str, method: str, path: str, tags: tuple[str, ...]
) -> bool:
    """Does ``selector`` pick the operation: ``tag:NAME``, a path glob (``GET /pets/*``), its id or name."""
    if selector.startswith("tag:"):
        return selector[4:] in tags
    verb, _, rest = selector.partition(" ")
    if rest.startswith("/") and verb.isalpha():
        return verb.upper() == method and fnmatch.fnmatchcase(path, rest.strip())
    if selector.startswith("/"):
        return fnmatch.fnmatchcase(path, selector)
    return selector in (operation_id, name)


def _servers(servers: Any) -> list[str]:
    """The server URLs, variables replaced by their defaults."""
    out: list[str] = []
    for server in servers if isinstance(servers, list) else ():
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            continue
        url: str = server["url"]
        variables = server.get("variables")
        if isinstance(variables, Mapping):
            for key, spec in variables.items():
                if isinstance(spec, Mapping) and isinstance(spec.get("default"), str):
                    url = url.replace("{" + str(key) + "}", spec["default"])
        out.append(url)
    return out


def _api_key_places(document: Mapping[str, Any]) -> set[tuple[str, str]]:
    """``(location, lower-cased name)`` of every API key the security schemes declare: never model arguments."""
    components = document.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, Mapping) else None
    places: set[tuple[str, str]] = set()
    for scheme in schemes.values() if isinstance(schemes, Mapping) else ():
        if isinstance(scheme, Mapping) and scheme.get("type") == "apiKey":
            where, name = scheme.get("in"), scheme.get("name")
            if isinstance(where, str) and isinstance(name, str):
                places.add((where, name.lower()))
    return places


def _tool_name(text: str, limit: int) -> str:
    """``text`` as a tool name (the rule ``@tool`` uses: 1-64 letters, digits, '_' or '-')."""
    name = _NAME_CHARS.sub("_", text.replace("{", "").replace("}", "")).strip("_-")
    name = re.sub(r"__+", "_", name) if name != text else name
    return (name or "operation")[: max(limit, 1)]


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


class _Reader:
    """Resolves references of one document and builds operations, within the bounds."""

    def __init__(self, document: Mapping[str, Any], api_keys: set[tuple[str, str]]) -> None:
        self.document = document
        self.api_keys = api_keys
        self.nodes = 0
        self.notes: list[str] = []

    # -- references --------------------------------------------------------------------------------
    def pointer(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise _Skip(f"the reference {ref[:200]!r} points outside the document (only '#/...' is read)")
        node: Any = self.document
        for raw in ref[1:].split("/")[1:] if ref != "#" else ():
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise _Skip(f"the reference {ref[:200]!r} points at nothing")
        return node

    def deref(self, node: Any, what: str) -> Any:
        """``node`` with a chain of ``$ref``s (not schemas: parameters, bodies, path items) followed."""
        seen: list[str] = []
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen or len(seen) >= _MAX_REF_CHAIN:
                raise _Skip(f"{what} is a loop of references ({' -> '.join(seen[:5])})")
            seen.append(ref)
            node = self.pointer(ref)
        return node

    def schema(self, node: Any, depth: int, stack: tuple[str, ...]) -> Any:
        """A copy of the schema ``node`` with references inlined; a cycle or the depth bound becomes ``{}``."""
        self._count()
        if depth > _MAX_DEPTH:
            self.notes.append(f"a schema nests more than {_MAX_DEPTH} levels: any value is accepted below")
            return {}
        if isinstance(node, bool):
            return node
        if not isinstance(node, Mapping):
            raise _Skip(f"a schema is a {type(node).__name__}, not an object")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                where = ref.rsplit("/", 1)[-1]
                self.notes.append(f"{where!r} contains itself: any value is accepted where it recurs")
                return {"description": f"A {where} (recursive: any JSON value is accepted here)."}
            resolved = self.schema(self.pointer(ref), depth + 1, (*stack, ref))
            siblings = {k: v for k, v in node.items() if k != "$ref" and k not in _DROPPED and isinstance(k, str)}
            if not siblings or not isinstance(resolved, dict):
                return resolved
            return {**resolved, **self._copy_schema(siblings, depth, stack)}
        return self._copy_schema(node, depth, stack)

    def _copy_schema(self, node: Mapping[Any, Any], depth: int, stack: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise _Skip(f"a schema keyword is a {type(key).__name__}, not a string")
            if key in _DROPPED or key.startswith("x-") or key == "$ref":
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {str(k): self.schema(v, depth + 1, stack) for k, v in value.items()}
            elif key in _SCHEMA_ONE and isinstance(value, (Mapping, bool)):
                out[key] = self.schema(value, depth + 1, stack)
            elif key in _SCHEMA_LIST | {"items"} and isinstance(value, list):
                out[key] = [self.schema(v, depth + 1, stack) for v in value]
            else:
                out[key] = self._data(value, depth + 1)
        return out

    def _data(self, value: Any, depth: int) -> Any:
        """A bounded copy of plain data in a schema (``enum``, ``default``, ``required``...)."""
        self._count()
        if depth > _MAX_DEPTH + 8:
            raise _Skip(f"a value in a schema nests more than {_MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            return {str(k): self._data(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self._data(v, depth + 1) for v in value]
        return value

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > _MAX_SCHEMA_NODES:
            raise _Skip(
                f"its schema has more than {_MAX_SCHEMA_NODES} parts once references are resolved (too large "
                "for a model to read)"
            )

    # -- operations --------------------------------------------------------------------------------
    def operation(
        self, name: str, method: str, path: str, operation: Mapping[str, Any], shared: Any, tags: tuple[str, ...]
    ) -> Operation:
        self.nodes = 0
        self.notes = []
        builder = _Schema()
        for where, param in self._parameters(shared, operation.get("parameters")):
            builder.add(*self._parameter(param, where))
        missing = [v for v in _TEMPLATE.findall(path) if v not in builder.path_names]
        if missing:
            raise _Skip(f"the path parameter {missing[0]!r} is not described")
        body, body_argument, content_type = None, None, None
        request = operation.get("requestBody")
        if request is not None:
            body, body_argument, content_type = self._body(builder, self.deref(request, "the request body"))
        text = " ".join(str(part).strip() for part in (operation.get("summary"), operation.get("description")) if part)
        if operation.get("deprecated") is True:
            text = f"(Deprecated.) {text}"
        return Operation(
            name=name,
            method=method.upper(),
            path=path,
            operation_id=operation.get("operationId") if isinstance(operation.get("operationId"), str) else None,
            tags=tags,
            description=(text or f"{method.upper()} {path}")[:_MAX_TEXT],
            parameters=builder.schema(),
            arguments=tuple(builder.arguments),
            body=body,
            body_argument=body_argument,
            content_type=content_type,
            notes=tuple(dict.fromkeys(self.notes)),
        )

    def _parameters(self, shared: Any, own: Any) -> list[tuple[str, Mapping[str, Any]]]:
        """The operation's parameters (its own replace the path item's of the same name and place), by place."""
        merged: dict[tuple[str, str], Mapping[str, Any]] = {}
        for group in (shared, own):
            if group is None:
                continue
            if not isinstance(group, list):
                raise _Skip("'parameters' is not a list")
            for raw in group:
                param = self.deref(raw, "a parameter")
                if not isinstance(param, Mapping):
                    raise _Skip("a parameter is not an object")
                name, where = param.get("name"), param.get("in")
                if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
                    raise _Skip(f"a parameter has no usable name ({str(name)[:100]!r})")
                if where not in _LOCATIONS:
                    raise _Skip(f"the parameter {name!r} is in {str(where)[:50]!r}, not path, query, header or cookie")
                merged[(str(where), name)] = param
        order: dict[str, int] = {loc: i for i, loc in enumerate(_LOCATIONS)}
        return [(where, p) for (where, _), p in sorted(merged.items(), key=lambda kv: order[kv[0][0]])]

    def _parameter(self, param: Mapping[str, Any], where: str) -> tuple[str, Location, dict[str, Any] | bool, bool]:
        name: str = param["name"]
        lower = name.lower()
        if (where, lower) in self.api_keys or (where == "header" and lower in _IGNORED_HEADERS):
            return name, "header", False, False  # auth or content negotiation: set by the toolset, never the model
        if where == "header" and (not _HEADER_NAME.fullmatch(name) or lower in _FORBIDDEN_HEADERS or lower == "cookie"):
            raise _Skip(f"the header parameter {name!r} cannot be sent")
        raw = param.get("schema")
        if raw is None and isinstance(param.get("content"), Mapping):
            media = next(iter(param["content"].values()), None)
            raw = media.get("schema") if isinstance(media, Mapping) else None
        schema = self.schema(raw if raw is not None else {}, 1, ())
        description = param.get("description")
        if isinstance(schema, dict) and isinstance(description, str) and "description" not in schema:
            schema["description"] = description[:_MAX_TEXT]
        required = where == "path" or param.get("required") is True
        location: Location = where  # type: ignore[assignment]  # checked against _LOCATIONS
        return name, location, schema, required

    def _body(self, builder: _Schema, request: Any) -> tuple[BodyKind, str | None, str]:
        if not isinstance(request, Mapping) or not isinstance(request.get("content"), Mapping):
            raise _Skip("the request body has no 'content'")
        content: Mapping[str, Any] = request["content"]
        chosen: tuple[BodyKind, str] | None = None
        for media in content:
            kind = str(media).split(";")[0].strip().lower()
            if _JSON_TYPE.match(kind):
                chosen = ("json", "application/json" if kind == "*/*" else kind)
                break
            if kind == "application/x-www-form-urlencoded" and chosen is None:
                chosen = ("form", kind)
            elif kind.startswith("text/") and chosen is None:
                chosen = ("text", kind)
        if chosen is None:
            kinds = ", ".join(str(m)[:60] for m in list(content)[:5]) or "none"
            raise _Skip(f"its request body is {kinds}; toolplan sends JSON, form-encoded or text bodies")
        kind, media_type = chosen
        media_object = content.get(media_type) or next(
            (v for k, v in content.items() if str(k).split(";")[0].strip().lower() == media_type), None
        )
        raw = media_object.get("schema") if isinstance(media_object, Mapping) else None
        schema = self.schema(raw if raw is not None else {}, 1, ())
        required = request.get("required") is True
        if kind != "text" and _flat_object(schema) and (required or not schema.get("required")):
            fields: Mapping[str, Any] = schema["properties"]
            needed = set(schema.get("required") or ())
            for field_name, field_schema in fields.items():
                builder.add(field_name, "body", field_schema, field_name in needed)
            return kind, None, media_type
        description = request.get("description")
        if isinstance(schema, dict) and isinstance(description, str) and "description" not in schema:
            schema["description"] = description[:_MAX_TEXT]
        argument = builder.add("body", "body", schema, required)
        return kind, argument, media_type


def _flat_object(schema: Any) -> bool:
    """An object schema whose properties are the whole story (no composition, no open-ended extras)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict) or not schema["properties"]:
        return False
    if schema.get("type", "object") not in ("object", ["object"]):
        return False
    if any(k in schema for k in ("allOf", "anyOf", "oneOf", "not", "patternProperties", "if")):
        return False
    return schema.get("additionalProperties", False) is False  # extra fields would have no argument


class _Schema:
    """The tool's object schema, built argument by argument (the folding rule of the module doc)."""

    def __init__(self) -> None:
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.arguments: list[Argument] = []
        self.path_names: set[str] = set()

    def add(self, wire: str, location: Location, schema: Any, required: bool) -> str:
        if schema is False:  # set by the toolset (auth, content negotiation)
            return ""
        if location == "path":
            self.path_names.add(wire)
        name = wire
        if name in self.properties:
            name = f"{wire}__{location}"
            n = 1
            while name in self.properties:
                n += 1
                name = f"{wire}__{location}_{n}"
        self.properties[name] = schema
        if required:
            self.required.append(name)
        self.arguments.append(Argument(name, wire, location))
        return name

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "properties": self.properties, "additionalProperties": False}
        if self.required:
            out["required"] = self.required
        return out
