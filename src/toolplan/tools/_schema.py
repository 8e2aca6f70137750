"""Tool parameter schemas: normalised to JSON Schema 2020-12 once, checked by one compiled validator.

Function catalogs in the wild write JSON Schema in several dialects: ``"type": "dict"``,
``"float"``, ``"tuple"``, ``"any"``, a ``"required": true`` or ``"optional": true`` on a property,
OpenAPI 3.0's ``nullable``, draft-04/07 keywords (boolean ``exclusiveMaximum``, ``definitions``,
``id``, array-form ``items``, ``dependencies``). `normalize_schema` rewrites them to 2020-12 and
says what it rewrote; anything else it cannot use (an unknown type name, a keyword of the wrong
shape, a pattern that is not a linear-time regular expression, a reference outside the schema) is
refused with `InvalidToolSchemaError`, naming the place in the schema.

`SchemaCheck` validates arguments against a normalised schema. Patterns run on RE2 (linear time:
a hostile ``^(a+)+$`` cannot stall a run), and nothing the validator raises leaves it: a failure
is a list of problems, each with the argument's path and what arrived.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from .._errors import InvalidToolSchemaError
from ._schema_fast import fast_check

__all__ = ("SchemaCheck", "compile_check", "normalize_schema")

_log = logging.getLogger("toolplan.tools")

_STANDARD = frozenset(("object", "array", "string", "number", "integer", "boolean", "null"))
#: Type names of other dialects, lower-cased, and the 2020-12 type each means ("" for any value).
_ALIASES = {
    "dict": "object",
    "map": "object",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "tuple": "array",
    "list": "array",
    "int": "integer",
    "long": "integer",
    "str": "string",
    "text": "string",
    "bool": "boolean",
    "none": "null",
    "any": "",
}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SCHEMA_ONE = (
    "additionalProperties",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAX_DEPTH = 64  # nesting of subschemas; deeper is refused (a schema is not a place for recursion bombs)
_MAX_PROBLEMS = 10  # problems reported per call
_SHOWN = 120  # characters of a bad value shown in a message


def _refuse(path: str, what: str) -> InvalidToolSchemaError:
    return InvalidToolSchemaError(what, path=path)


def _at(path: str, key: object) -> str:
    return f"{path}/{key}"


@functools.lru_cache(maxsize=4096)
def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching); raises ``ValueError`` when RE2 cannot compile it."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options=options)
    except Exception as exc:  # re2.error, or a pattern RE2 cannot take (look-arounds, back-references)
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(str(detail)) from None


class _Normalizer:
    __slots__ = ("notes", "strict", "uses_pattern_properties", "uses_unevaluated_properties")

    def __init__(self, strict: bool) -> None:
        self.notes: list[str] = []
        self.strict = strict
        self.uses_pattern_properties = False
        self.uses_unevaluated_properties = False

    def note(self, path: str, what: str) -> None:
        self.notes.append(f"{path or '/'}: {what}")

    def schema(self, node: Any, path: str, depth: int) -> Any:
        """The 2020-12 form of the schema ``node`` found at ``path``."""
        if isinstance(node, bool):
            return node
        if isinstance(node, str) and node.lower() in _STANDARD | _ALIASES.keys():  # "items": "string"
            self.note(path, f"the type name {node!r} written as a schema became {{'type': ...}}")
            return self.schema({"type": node}, path, depth)
        if not isinstance(node, Mapping):
            raise _refuse(path, f"expected a schema (a JSON object or a boolean), got {type(node).__name__}")
        if depth > _MAX_DEPTH:
            raise _refuse(path, f"the schema nests more than {_MAX_DEPTH} levels deep")
        for key in node:
            if not isinstance(key, str):
                raise _refuse(path, f"keyword {key!r} is not a string")
        out: dict[str, Any] = dict(node)
        self._dialect(out, path)
        if isinstance(out.get("properties"), Mapping):  # before the properties are read as schemas
            self._property_flags(out, path)
        depth += 1
        for key in _SCHEMA_MAPS:
            if key in out:
                out[key] = self._schema_map(out[key], _at(path, key), depth)
        for key in _SCHEMA_ONE:
            if key in out:
                out[key] = self.schema(out[key], _at(path, key), depth)
        for key in _SCHEMA_LISTS:
            if key in out:
                value = out[key]
                if not isinstance(value, list) or not value:
                    raise _refuse(_at(path, key), "expected a non-empty list of schemas")
                out[key] = [self.schema(v, _at(_at(path, key), i), depth) for i, v in enumerate(value)]
        if "items" in out:
            out["items"] = self.schema(out["items"], _at(path, "items"), depth)
        if "patternProperties" in out:
            self.uses_pattern_properties = True
            for pattern in out["patternProperties"]:
                self._pattern(pattern, _at(_at(path, "patternProperties"), pattern))
        if "unevaluatedProperties" in out:
            self.uses_unevaluated_properties = True
        if "pattern" in out:
            if not isinstance(out["pattern"], str):
                raise _refuse(_at(path, "pattern"), "a pattern must be a string")
            self._pattern(out["pattern"], _at(path, "pattern"))
        if "$ref" in out:
            ref = out["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise _refuse(
                    _at(path, "$ref"),
                    f"only references inside the schema ('#/...') are supported, got {_short(ref)}",
                )
        others = ("additionalProperties", "patternProperties", "unevaluatedProperties")
        if self.strict and _is_object_schema(out) and not any(k in out for k in others):
            out["additionalProperties"] = False
        return out

    def _schema_map(self, value: Any, path: str, depth: int) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise _refuse(path, f"expected an object mapping names to schemas, got {type(value).__name__}")
        return {str(k): self.schema(v, _at(path, k), depth) for k, v in value.items()}

    def _pattern(self, pattern: str, path: str) -> None:
        try:
            linear_regex(pattern)
        except ValueError as exc:
            raise _refuse(
                path,
                f"the pattern {_short(pattern)} is not a linear-time regular expression ({exc}); "
                "look-arounds and back-references are not supported",
            ) from None

    def _dialect(self, out: dict[str, Any], path: str) -> None:
        """Rewrite the keywords of other dialects in ``out`` (one schema object) in place."""
        if "$schema" in out:
            declared = out.pop("$schema")
            if declared != "https://json-schema.org/draft/2020-12/schema":
                self.note(path, f"$schema {_short(declared)} dropped: read as JSON Schema 2020-12")
        for key in ("id", "$id"):  # draft-04 ``id``; any base URI: references resolve inside the schema
            if key in out and isinstance(out[key], str):
                del out[key]
                self.note(path, f"{key!r} dropped")
        if "type" in out:
            self._type(out, path)
        if "nullable" in out:
            nullable = out.pop("nullable")
            if nullable is True:
                self._allow_null(out)
                self.note(path, "OpenAPI 'nullable' became a 'null' type")
            elif nullable is not False:
                raise _refuse(_at(path, "nullable"), f"expected true or false, got {_short(nullable)}")
        for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
            if isinstance(out.get(exclusive), bool):  # draft-04: a flag on the bound
                flag = out.pop(exclusive)
                if flag and bound in out:
                    out[exclusive] = out.pop(bound)
                self.note(path, f"draft-04 boolean {exclusive!r} became a number")
        if "definitions" in out:
            defs = out.pop("definitions")
            merged = dict(cast(Mapping[str, Any], defs)) if isinstance(defs, Mapping) else defs
            if isinstance(merged, dict) and isinstance(out.get("$defs"), Mapping):
                merged = {**merged, **out["$defs"]}
            out["$defs"] = merged
            self.note(path, "'definitions' became '$defs'")
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            out["$ref"] = "#/$defs/" + ref[len("#/definitions/") :]
        if isinstance(out.get("items"), list):  # draft-07 tuple validation
            prefix = out.pop("items")
            if prefix:  # (an empty list said nothing)
                out["prefixItems"] = prefix
            if "additionalItems" in out:
                out["items"] = out.pop("additionalItems")
            self.note(path, "array-form 'items' became 'prefixItems'")
        elif "additionalItems" in out:
            del out["additionalItems"]
            self.note(path, "'additionalItems' without array-form 'items' dropped (it had no effect)")
        if "dependencies" in out:
            deps = out.pop("dependencies")
            if not isinstance(deps, Mapping):
                raise _refuse(_at(path, "dependencies"), "expected an object")
            for name, dep in cast(Mapping[str, Any], deps).items():
                key = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
                out.setdefault(key, {})[name] = dep
            self.note(path, "'dependencies' became 'dependentRequired'/'dependentSchemas'")
        for flag in ("required", "optional"):  # a flag left where no parent object reads it
            if isinstance(out.get(flag), bool):
                del out[flag]
                self.note(path, f"a boolean {flag!r} outside an object's properties dropped")

    def _type(self, out: dict[str, Any], path: str) -> None:
        declared = out["type"]
        names: list[Any] = declared if isinstance(declared, list) else [declared]
        if not names:
            raise _refuse(_at(path, "type"), "an empty list of types")
        types: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise _refuse(_at(path, "type"), f"a type name must be a string, got {_short(name)}")
            if name in _STANDARD:
                mapped = name
            else:
                lowered = name.lower()
                mapped_or_none = lowered if lowered in _STANDARD else _ALIASES.get(lowered)
                if mapped_or_none is None:
                    raise _refuse(
                        _at(path, "type"),
                        f"unknown type name {_short(name)} (JSON Schema types: {', '.join(sorted(_STANDARD))})",
                    )
                mapped = mapped_or_none
                self.note(path, f"type {name!r} became {mapped or 'any value'!r}")
            if mapped == "":  # "any": no type constraint at all
                del out["type"]
                return
            if mapped not in types:
                types.append(mapped)
        out["type"] = types[0] if len(types) == 1 else types

    @staticmethod
    def _allow_null(out: dict[str, Any]) -> None:
        declared = out.get("type")
        if isinstance(declared, str) and declared != "null":
            out["type"] = [declared, "null"]
        elif isinstance(declared, list) and "null" not in declared:
            out["type"] = [*declared, "null"]
        enum = out.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]

    def _property_flags(self, out: dict[str, Any], path: str) -> None:
        """A property's own ``"required": true`` / ``"optional": true`` (draft-03, catalogs) into the object's list."""
        properties = out["properties"] = dict(cast(Mapping[str, Any], out["properties"]))
        required = out.get("required")
        names: list[str] | None = list(cast(list[str], required)) if isinstance(required, list) else None
        for name, prop in properties.items():
            if not isinstance(prop, dict):
                continue
            prop = cast(dict[str, Any], prop)
            flags = {k: prop[k] for k in ("required", "optional") if isinstance(prop.get(k), bool)}
            if not flags:
                continue
            prop = properties[name] = {k: v for k, v in prop.items() if k not in flags}
            needed = flags.get("required", not flags.get("optional", False))
            if names is None:
                names = []
            if needed and name not in names:
                names.append(name)
            elif not needed and name in names:
                names.remove(name)
            self.note(_at(_at(path, "properties"), name), f"{', '.join(flags)} flag moved to the object's 'required'")
        if names is not None and (names or "required" in out):
            out["required"] = names


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type")
    return declared == "object" or (declared is None and "properties" in schema)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__, an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def normalize_schema(
    schema: Any, *, strict: bool = False, tool: str | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``schema`` (a tool's parameters) as JSON Schema 2020-12, and notes on what was rewritten.

    With ``strict``, object schemas that say nothing of other properties refuse them
    (``additionalProperties: false``).

    Raises:
        InvalidToolSchemaError: the schema cannot be used; the message names the place in it.
    """
    try:
        return _normalize(schema, strict=strict, tool=tool)
    except InvalidToolSchemaError as exc:
        if tool is not None and exc.tool is None:
            raise InvalidToolSchemaError(exc.detail, path=exc.path, tool=tool) from None
        raise
    except RecursionError:
        raise InvalidToolSchemaError("the schema nests too deeply", path="", tool=tool) from None


def _normalize(schema: Any, *, strict: bool, tool: str | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    if schema is None:
        schema = {}
    if not isinstance(schema, Mapping):
        raise _refuse("", f"the parameters schema must be a JSON object, got {type(schema).__name__}")
    normalizer = _Normalizer(strict)
    out = normalizer.schema(schema, "", 0)
    declared = out.get("type")
    if declared is None:
        out["type"] = "object"
    elif declared != "object":
        raise _refuse("/type", f"the parameters of a tool must be an object schema, got type {_short(declared)}")
    if normalizer.uses_pattern_properties and normalizer.uses_unevaluated_properties:
        raise _refuse("", "'unevaluatedProperties' together with 'patternProperties' is not supported")
    _check_against_metaschema(out)
    notes = tuple(normalizer.notes)
    if notes:
        _log.debug("tool %s: schema rewritten to JSON Schema 2020-12: %s", tool or "?", "; ".join(notes))
    return out, notes


@functools.cache
def _metaschema_validator() -> Any:
    import jsonschema

    # No format checker: patterns were compiled by RE2 already (the metaschema's would use Python's re).
    return jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)


_CHECKED_LIMIT = 4096  # property schemas remembered as valid (a catalog repeats them: ids, page sizes, shared types)
_checked: dict[str, None] = {}


def _check_against_metaschema(schema: dict[str, Any]) -> None:
    """Refuse a schema the 2020-12 metaschema refuses, naming the place.

    The metaschema checks each property's schema on its own, so they are checked one by one, and a
    part checked before (by its JSON text) is not checked again: a catalog of a thousand operations
    repeats most of them, and each check costs milliseconds whatever its size.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        _check_one(schema, "")
        return
    rest = {k: v for k, v in schema.items() if k != "properties"}
    required = rest.get("required")
    if isinstance(required, list) and all(type(r) is str for r in required) and len(set(required)) == len(required):
        del rest["required"]  # unique names: all the metaschema asks of it
    _check_cached(rest, "")
    for name, sub in properties.items():
        _check_cached(sub, f"/properties/{name}")


def _check_cached(schema: Any, prefix: str) -> None:
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not JSON text (a Python object as a default): checked every time
        _check_one(schema, prefix)
        return
    if key in _checked:
        return
    _check_one(schema, prefix)
    if len(_checked) >= _CHECKED_LIMIT:
        _checked.clear()
    _checked[key] = None


def _check_one(schema: Any, prefix: str) -> None:
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(_metaschema_validator().iter_errors(schema))
    except Exception as exc:  # a schema the metaschema's own checks cannot read
        raise _refuse("", f"the schema cannot be read ({type(exc).__name__}: {_short(str(exc))})") from None
    if error is not None:
        where = prefix + "".join(f"/{p}" for p in error.absolute_path)
        raise _refuse(where, f"not valid JSON Schema 2020-12: {_short(error.message)}")


# -- validation -------------------------------------------------------------------------------------


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and linear_regex(pattern).search(instance) is None:
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _pattern_properties_keyword(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = linear_regex(pattern)
        for key, value in instance.items():
            if regex.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties_keyword(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    regexes = [linear_regex(p) for p in schema.get("patternProperties", {})]
    extras = [k for k in instance if k not in properties and not any(r.search(k) is not None for r in regexes)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(_short(e) for e in sorted(extras, key=str)[:5])
        yield ValidationError(f"unexpected argument{'s' if len(extras) > 1 else ''} {shown}")


@functools.cache
def _validator_class() -> Any:
    import jsonschema

    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        {
            "pattern": _pattern_keyword,
            "patternProperties": _pattern_properties_keyword,
            "additionalProperties": _additional_properties_keyword,
        },
    )


class SchemaCheck:
    """One compiled validator for a normalised parameters schema; never raises a foreign exception."""

    __slots__ = ("_fast", "_validator", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._validator = _validator_class()(dict(schema))
        self._fast = fast_check(schema)  # a quick yes for plain schemas; jsonschema for the rest

    def problems(self, arguments: Any, deferred: frozenset[str] = frozenset()) -> list[str]:
        """Problems with ``arguments``, each with where it is and what arrived; keys in ``deferred`` skipped."""
        try:
            return self._problems(arguments, deferred)
        except RecursionError:
            return ["the arguments nest too deeply to be checked"]
        except Exception as exc:  # a validator bug or a value it cannot read: the call is refused, coded
            return [f"the arguments could not be checked against the schema ({type(exc).__name__}: {_short(str(exc))})"]

    def _problems(self, arguments: Any, deferred: frozenset[str]) -> list[str]:
        if deferred and isinstance(arguments, Mapping):
            arguments = {k: v for k, v in cast(Mapping[str, Any], arguments).items() if k not in deferred}
        elif not isinstance(arguments, dict):
            arguments = dict(arguments) if isinstance(arguments, Mapping) else arguments
        errors = self._validator.iter_errors(arguments)
        first = next(errors, None)
        if first is None:
            return []
        problems: list[str] = []
        for err in (first, *errors):
            path = list(err.absolute_path)
            if deferred and path and path[0] in deferred:
                continue
            if deferred and err.validator == "required" and any(f"'{d}'" in err.message for d in deferred):
                continue
            problems.append(_describe(err))
            if len(problems) >= _MAX_PROBLEMS:
                break
        return problems

    def first_problem(self, arguments: Mapping[str, Any]) -> str | None:
        """None when ``arguments`` are valid, else every problem in one sentence (fast when valid)."""
        try:
            fast = self._fast
            if fast is not None and fast(arguments):
                return None
            if self._validator.is_valid(arguments):  # the quick check said no, or had nothing to say
                return None
        except Exception:  # described below, coded
            pass
        return "; ".join(self.problems(arguments)) or "the arguments do not match the tool's schema"


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err.absolute_path)
    schema_path = "/".join(str(p) for p in err.absolute_schema_path)
    message = err.message if len(err.message) <= 300 else err.message[:299] + "…"
    if err.validator == "required" or not where:
        return f"{message} (schema: {schema_path})"
    shown = _short(err.instance)
    got = "" if message.startswith(shown[:40]) else f"; got {shown}"  # most messages start with the value
    return f"argument {where!r}: {message}{got} (schema: {schema_path})"


def invalid_message(name: str, problem: str) -> str:
    """The message of a call of ``name`` refused by its schema check."""
    return f"Invalid arguments for tool {name!r}: {problem}. Call it again with arguments matching its schema."


@functools.lru_cache(maxsize=1024)
def _cached_check(key: str) -> SchemaCheck:
    import json

    schema, _notes = normalize_schema(json.loads(key))
    return SchemaCheck(schema)


def compile_check(schema: Mapping[str, Any]) -> SchemaCheck:
    """A `SchemaCheck` for an already normalised schema."""
    return SchemaCheck(schema)


def check_for(schema: Mapping[str, Any]) -> Callable[[Any, frozenset[str]], list[str]]:
    """The problems function of ``schema`` (normalised here; cached by content)."""
    import json

    try:
        key = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return SchemaCheck(normalize_schema(schema)[0]).problems
    return _cached_check(key).problems
