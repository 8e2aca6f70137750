"""Reading OpenAPI documents: folding, names, filters, references, and hostile documents (no network)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolplan import OpenAPISpecError, UserError
from toolplan.builtin import OpenAPIToolset
from toolplan.tools import ToolAnnotations

ROOT = Path(__file__).resolve().parents[2]


def catalog() -> Any:
    """``bench/openapi_catalog.py`` (this folder's ``bench`` is not the repository's)."""
    spec = importlib.util.spec_from_file_location("openapi_catalog", ROOT / "bench" / "openapi_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def document(paths: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "servers": [{"url": "https://api.example.com"}],
            "paths": paths, **more}  # fmt: skip


def schemas(ts: OpenAPIToolset) -> dict[str, Any]:
    return {d.name: d.parameters_json_schema for d in ts.definitions()}


PET = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "id": {"type": "integer"}}}


def test_a_3_0_spec_with_nullable_and_a_name_clash() -> None:
    ts = OpenAPIToolset(document({
        "/pets/{id}": {
            "put": {
                "operationId": "replacePet",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {"name": "note", "in": "query", "schema": {"type": "string", "nullable": True}},
                    {"name": "X-API-Key", "in": "header", "schema": {"type": "string"}},
                    {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {"required": True, "content": {"application/json": {"schema": PET}}},
            }
        }
    }, components={"securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "x-api-key"}}}))  # fmt: skip
    schema = schemas(ts)["replacePet"]
    assert list(schema["properties"]) == ["id", "note", "name", "id__body"]  # path first; the body's id renamed
    assert schema["properties"]["note"]["type"] == ["string", "null"]  # 3.0 nullable, normalised
    assert schema["required"] == ["id", "name"] and schema["additionalProperties"] is False


def test_an_optional_or_non_object_body_is_one_argument() -> None:
    ts = OpenAPIToolset(document({
        "/a": {"post": {"operationId": "a", "requestBody": {"content": {"application/json": {"schema": PET}}}}},
        "/b": {"post": {"operationId": "b", "requestBody": {"required": True, "content": {
            "application/json": {"schema": {"type": "array", "items": PET}}}}}},
        "/c": {"post": {"operationId": "c", "requestBody": {"required": True, "content": {
            "text/plain": {"schema": {"type": "string"}}}}}},
        "/d": {"post": {"operationId": "d", "requestBody": {"required": True, "content": {
            "application/octet-stream": {"schema": {"type": "string"}}}}}},
    }))  # fmt: skip
    got = schemas(ts)
    assert list(got["a"]["properties"]) == ["body"] and "required" not in got["a"]
    assert got["b"]["properties"]["body"]["type"] == "array" and got["b"]["required"] == ["body"]
    assert got["c"]["properties"]["body"]["type"] == "string"
    assert "d" not in got and "octet-stream" in ts.skipped["POST /d"]


def test_names_from_method_and_path_and_clashes_get_suffixes() -> None:
    ts = OpenAPIToolset(document({
        "/users/{user-id}/posts": {"get": {}, "post": {"operationId": "make post!"},
                                   "parameters": [{"name": "user-id", "in": "path", "schema": {"type": "string"}}]},
        "/x": {"get": {"operationId": "make_post"}},
        "/y": {"get": {"operationId": "a" * 100}},
    }, servers=[]), base_url="https://api.example.com", prefix="blog_")  # fmt: skip
    assert ts.names == ["blog_get_users_user-id_posts", "blog_make_post", "blog_make_post_2", "blog_" + "a" * 55]
    assert all(len(n) <= 64 for n in ts.names)
    assert ts.operation("blog_make_post_2") == ("GET", "/x")


def test_include_and_exclude_by_id_tag_and_path() -> None:
    paths = {
        "/pets": {"get": {"operationId": "listPets", "tags": ["pets"]},
                  "post": {"operationId": "addPet", "tags": ["pets"]}},
        "/pets/{id}": {"delete": {"operationId": "deletePet", "tags": ["admin"], "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]}},
        "/stores": {"get": {"operationId": "listStores"}},
    }  # fmt: skip
    assert OpenAPIToolset(document(paths), include=["tag:pets"]).names == ["listPets", "addPet"]
    assert OpenAPIToolset(document(paths), include=["/pets*"], exclude=["tag:admin"]).names == ["listPets", "addPet"]
    assert OpenAPIToolset(document(paths), include=["GET /*"]).names == ["listPets", "listStores"]
    assert OpenAPIToolset(document(paths), exclude=["addPet", "deletePet"]).names == ["listPets", "listStores"]
    overridden = OpenAPIToolset(document(paths), annotations={"deletePet": ToolAnnotations(destructive=False)})
    by_name = {d.name: d.annotations for d in overridden.definitions()}
    assert not by_name["deletePet"].destructive and by_name["listPets"].read_only


def test_cycles_refs_and_depth_are_bounded() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        node = {"type": "object", "properties": {"x": node}}
    components = {"schemas": {
        "Tree": {"type": "object",
                 "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}},
        "Deep": node,
        "Loop": {"$ref": "#/components/schemas/Loop2"}, "Loop2": {"$ref": "#/components/schemas/Loop"},
    }, "parameters": {"P": {"$ref": "#/components/parameters/P"}}}  # fmt: skip
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Tree"}}}}

    def op(schema: Any) -> Any:
        return {"post": {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}}

    ts = OpenAPIToolset(document({
        "/tree": {"post": {"operationId": "tree", "requestBody": body}},
        "/deep": op({"$ref": "#/components/schemas/Deep"}),
        "/loop": op({"$ref": "#/components/schemas/Loop"}),
        "/out": op({"$ref": "other.json#/Pet"}),
        "/none": op({"$ref": "#/components/schemas/Nope"}),
        "/param": {"get": {"parameters": [{"$ref": "#/components/parameters/P"}]}},
    }, components=components))  # fmt: skip
    assert schemas(ts)["tree"]["properties"]["kids"]["items"]["description"].startswith("A Tree (recursive")
    assert ts.notes["tree"] == ("'Tree' contains itself: any value is accepted where it recurs",)
    assert "nests more than" in ts.notes["post_deep"][0]
    assert "post_loop" in ts.names  # a loop of bare references becomes a permissive schema
    assert "outside the document" in ts.skipped["POST /out"]
    assert "points at nothing" in ts.skipped["POST /none"]
    assert "loop of references" in ts.skipped["GET /param"]


def test_an_exploding_schema_is_left_out() -> None:
    schemas_: dict[str, Any] = {"L0": {"type": "string"}}
    for i in range(1, 30):  # each level refers to the one below twice: 2**30 nodes once inlined
        ref = {"$ref": f"#/components/schemas/L{i - 1}"}
        schemas_[f"L{i}"] = {"type": "object", "properties": {"a": ref, "b": ref}}
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/L29"}}}}
    started = time.perf_counter()
    ts = OpenAPIToolset(document({"/big": {"post": {"requestBody": body}}, "/ok": {"get": {}}},
                                 components={"schemas": schemas_}))  # fmt: skip
    assert time.perf_counter() - started < 10  # bounded work, not 2**30 (a generous bound, not a benchmark)
    assert ts.names == ["get_ok"] and "more than 20000 parts" in ts.skipped["POST /big"]


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        ({"/a": {"get": {"parameters": [{"name": "m", "in": "matrix"}]}}}, "not path, query, header or cookie"),
        ({"/a": {"get": {"parameters": [{"in": "query"}]}}}, "no usable name"),
        ({"/a/{id}": {"get": {}}}, "path parameter 'id' is not described"),
        ({"/a": {"get": {"parameters": [{"name": "Bad Header", "in": "header"}]}}}, "cannot be sent"),
        ({"/a": {"get": {"parameters": [{"name": "Host", "in": "header"}]}}}, "cannot be sent"),
        ({"/a": {"get": "nonsense"}}, "not an object"),
        ({"/a": {"get": {"parameters": {"not": "a list"}}}}, "not a list"),
        ({"/a": {"get": {"parameters": [{"name": "p", "in": "query", "schema": {"type": "strange"}}]}}}, "strange"),
        ({"/a": {"get": {"parameters": [{"name": "p", "in": "query", "schema": {"pattern": "(a)\\1"}}]}}}, "pattern"),
    ],
)
def test_operations_that_cannot_be_used_are_left_out(paths: dict[str, Any], why: str) -> None:
    ts = OpenAPIToolset(document({**paths, "/fine": {"get": {"operationId": "fine"}}}))
    assert ts.names == ["fine"]
    assert len(ts.skipped) == 1 and why in next(iter(ts.skipped.values()))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "is a JSON object"),
        ({"swagger": "2.0", "paths": {}}, "swagger '2.0'"),
        ({"openapi": "4.0.0", "paths": {}}, "reads OpenAPI 3.0 and 3.1"),
        ({"openapi": "3.1.0"}, "no 'paths'"),
    ],
)
def test_documents_that_are_not_openapi_3(spec: Any, message: str) -> None:
    with pytest.raises(OpenAPISpecError, match=message) as caught:
        OpenAPIToolset(spec, base_url="https://api.example.com")
    assert caught.value.code == "invalid_openapi_spec"


def test_files_base_urls_and_options(tmp_path: Path) -> None:
    good = tmp_path / "api.json"
    good.write_text(json.dumps(document({"/a": {"get": {"operationId": "a"}}})))
    assert OpenAPIToolset(good).names == ["a"] and OpenAPIToolset(str(good)).base_url == "https://api.example.com"
    yaml_file = tmp_path / "api.yaml"
    yaml_file.write_text("openapi: 3.1.0\ninfo: {title: Y}\npaths:\n  /b:\n    get: {operationId: b}\n")
    assert OpenAPIToolset(yaml_file, base_url="https://api.example.com/v2/").base_url == "https://api.example.com/v2"
    with pytest.raises(OpenAPISpecError, match="does not exist"):
        OpenAPIToolset(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OpenAPISpecError, match="not usable JSON"):
        OpenAPIToolset(bad)
    with pytest.raises(OpenAPISpecError, match="the limit is 10"):
        OpenAPIToolset(good, max_spec_bytes=10)
    with pytest.raises(UserError, match="names no server"):
        OpenAPIToolset(yaml_file)
    with pytest.raises(UserError, match="from_url"):
        OpenAPIToolset("https://api.example.com/openapi.json")
    with pytest.raises(UserError, match="absolute http"):
        OpenAPIToolset(good, base_url="/relative")
    with pytest.raises(UserError, match="BearerAuth, BasicAuth or APIKeyAuth"):
        OpenAPIToolset(good, auth="token")  # type: ignore[arg-type]


def test_a_thousand_operations_load_fast() -> None:
    spec = catalog().synthetic_spec(1000)
    started = time.perf_counter()
    ts = OpenAPIToolset(spec)
    elapsed = time.perf_counter() - started
    assert len(ts.names) == 1000 and ts.skipped == {}
    assert elapsed < 30, elapsed  # a generous bound (2 shared cores); the figure is in docs/openapi.md
    one = {d.name: d for d in ts.definitions()}["billing_create_customer"]
    assert one.parameters_json_schema["required"] == ["name"]
    assert one.parameters_json_schema["properties"]["status"]["enum"][0] == "draft"  # a $ref, inlined
    assert "X-API-Key" not in json.dumps(one.parameters_json_schema)  # the API key is auth, not an argument
    facts = catalog().facts(spec)
    assert len(facts) == 1000 and len({f["namespace"] for f in facts}) == 12


def test_too_many_operations_is_refused() -> None:
    paths: dict[str, Any] = {f"/p{i}": {"get": {}} for i in range(20_001)}
    with pytest.raises(OpenAPISpecError, match="more than 20000 operations"):
        OpenAPIToolset(document(paths))


_WORDS = ["$ref", "#/components/schemas/A", "#/components/schemas", "#/paths", "object", "string", "array", "null",
          "path", "query", "header", "cookie", "body", "id", "application/json", "text/plain", "Host", "x"]  # fmt: skip
_KEYS = ["$ref", "type", "properties", "items", "parameters", "name", "in", "schema", "requestBody", "content",
         "application/json", "required", "get", "post", "delete", "operationId", "allOf", "anyOf", "nullable", "enum",
         "pattern", "additionalProperties", "A", "id", "tags", "summary"]  # fmt: skip
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.sampled_from(_WORDS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=25,
)


_PARAMETER = st.fixed_dictionaries(
    {"name": st.sampled_from(["id", "x", "q", "Host", "a b", ""]), "in": st.sampled_from([*_WORDS[8:13], "matrix"])},
    optional={"schema": _VALUES, "required": st.booleans(), "description": _VALUES},
)
_BODY = st.fixed_dictionaries(
    {"content": st.dictionaries(
        st.sampled_from(["application/json", "text/plain", "image/png", "application/x-www-form-urlencoded"]),
        st.fixed_dictionaries({}, optional={"schema": _VALUES}), max_size=2)},
    optional={"required": st.booleans()},
)  # fmt: skip
_OPERATION = st.fixed_dictionaries(
    {},
    optional={"operationId": st.sampled_from(["op", "x y", "", "get_a"]), "summary": _VALUES,
              "parameters": st.lists(_PARAMETER | _VALUES, max_size=3), "requestBody": _BODY | _VALUES},
)  # fmt: skip


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    paths=st.dictionaries(
        st.sampled_from(["/a", "/a/{id}", "b", "/{x}/y"]),
        st.dictionaries(st.sampled_from(["get", "post", "delete", "parameters"]), _OPERATION | _VALUES, max_size=3)
        | _VALUES,
        max_size=3,
    ),
    schema=_VALUES,
)
def test_any_document_is_tools_or_a_coded_error(paths: dict[str, Any], schema: Any) -> None:
    spec = document(paths, components={"schemas": {"A": schema}})
    try:
        ts = OpenAPIToolset(spec)
    except UserError as exc:  # OpenAPISpecError is one
        assert exc.code in ("invalid_openapi_spec", "user_error")
        return
    for definition in ts.definitions():
        assert definition.parameters_json_schema["type"] == "object"
        assert isinstance(ts.argument_problems(definition.name, {}, frozenset()), list)
    assert all(isinstance(why, str) and why for why in ts.skipped.values())
    built.append(len(ts.names))


built: list[int] = []  # operations made per example (the strategy reaches real operations, not only errors)


def test_the_hostile_documents_made_operations() -> None:
    if built:  # run after the property test (file order)
        assert sum(built) > 10
