"""OpenAPIToolset against a real FastAPI app on 127.0.0.1, whose generated /openapi.json is the input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from api_app import KEY, TOKEN, ApiServer

from toolplan import OpenAPISpecError, PlanValidationError, ToolError, ToolResult, UserError, execute_plan
from toolplan.agent import Agent
from toolplan.builtin import APIKeyAuth, BasicAuth, BearerAuth, OpenAPIToolset
from toolplan.models import AssistantMessage, ToolCall
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolAnnotations


async def toolset(api: ApiServer, **options: Any) -> OpenAPIToolset:
    return await OpenAPIToolset.from_url(f"{api.url}/openapi.json", allow_private_networks=True, **options)


def by_name(ts: OpenAPIToolset) -> dict[str, Any]:
    return {d.name: d for d in ts.definitions()}


async def test_the_generated_spec_becomes_tools(api: ApiServer) -> None:
    ts = await toolset(api)
    assert ts.title == "Pet store" and ts.base_url == api.url and ts.skipped == {}
    tools = by_name(ts)
    get_pet = tools["get_pet_pets__pet_id__get"]
    assert get_pet.description == "Get one pet"
    assert get_pet.parameters_json_schema["required"] == ["pet_id"]
    assert get_pet.parameters_json_schema["properties"]["pet_id"]["type"] == "integer"
    a = get_pet.annotations
    assert (a.read_only, a.idempotent, a.destructive) == (True, True, False)
    create = tools["create_pet_pets_post"]
    assert set(create.parameters_json_schema["properties"]) == {"name", "tag"}  # the body's fields, folded
    assert create.parameters_json_schema["required"] == ["name"]
    a = create.annotations
    assert (a.read_only, a.idempotent, a.destructive) == (False, False, False)
    a = tools["replace_pet_pets__pet_id__put"].annotations
    assert (a.read_only, a.idempotent, a.destructive) == (False, True, False)
    a = tools["delete_pet_pets__pet_id__delete"].annotations
    assert (a.read_only, a.idempotent, a.destructive) == (False, True, True)
    # Credentials are the developer's: the API key header is no argument of any tool.
    assert tools["with_key_secure_key_get"].parameters_json_schema["properties"] == {}
    assert ts.operation("get_pet_pets__pet_id__get") == ("GET", "/pets/{pet_id}")


async def test_a_plan_calls_the_operations_with_references(api: ApiServer) -> None:
    ts = await toolset(api, include=["tag:pets"])
    plan = {
        "steps": [
            {"id": "new", "tool": "create_pet_pets_post", "arguments": {"name": "Kit", "tag": "cat"}},
            {"id": "got", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": "$ref:new.id"}},
            {"id": "cats", "tool": "list_pets_pets_get", "arguments": {"tag": "cat", "limit": 5},
             "depends_on": ["new"]},
            {"id": "missing", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": 999}},
        ]
    }  # fmt: skip
    result = await execute_plan(plan, [ts])
    assert result.steps["got"].output["name"] == "Kit"
    assert {p["name"] for p in result.steps["cats"].output} == {"Tom", "Kit"}
    missing = result.steps["missing"]
    assert missing.status == "failed" and missing.error is not None
    assert "404" in missing.error.message and "no pet 999" in missing.error.message
    assert missing.error.kind == "business"


async def test_put_delete_text_and_empty_answers(api: ApiServer) -> None:
    ts = await toolset(api)
    put = await ts.execute("replace_pet_pets__pet_id__put", {"pet_id": 2, "name": "Tomcat"})
    assert put.ok and put.content == {"id": 2, "name": "Tomcat", "tag": None}
    gone = await ts.execute("delete_pet_pets__pet_id__delete", {"pet_id": 2})
    assert gone.ok and gone.content is None
    text = await ts.execute("text_text_get", {})
    assert text.content == "plain words"


async def test_wrong_arguments_call_nothing(api: ApiServer) -> None:
    ts = await toolset(api)
    before = len(api.seen)
    plan = {"steps": [{"id": "a", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": "one", "x": 1}}]}
    with pytest.raises(PlanValidationError) as caught:
        await execute_plan(plan, [ts])
    assert [i.code for i in caught.value.issues] == ["invalid_arguments", "invalid_arguments"]
    assert "unexpected argument 'x'" in str(caught.value)
    assert len(api.seen) == before


async def test_header_query_and_cookie_arguments(api: ApiServer) -> None:
    ts = await toolset(api)
    echo = by_name(ts)["echo_echo_get"]
    assert "x-trace" in echo.parameters_json_schema["properties"]
    got = await ts.execute("echo_echo_get", {"x-trace": "abc"})
    assert got.content["trace"] == "abc"
    with pytest.raises(ToolError, match="single line"):
        await ts.execute("echo_echo_get", {"x-trace": "a\r\nInjected: 1"})
    keyed = await toolset(
        api, auth=[APIKeyAuth("sid", "s1", location="cookie"), APIKeyAuth("k", "v", location="query")]
    )
    got = await keyed.execute("echo_echo_get", {})
    assert got.content["cookies"] == {"sid": "s1"} and got.content["query"] == {"k": "v"}


async def test_auth_from_the_developer(api: ApiServer) -> None:
    anonymous = await toolset(api, include=["tag:auth"])
    denied = await anonymous.execute("with_key_secure_key_get", {})
    assert not denied.ok and "401" in (denied.error or "") and denied.content["status"] == 401
    keyed = await toolset(api, include=["tag:auth"], auth=APIKeyAuth("X-API-Key", KEY))
    assert (await keyed.execute("with_key_secure_key_get", {})).content == {"ok": True}
    bearer = await toolset(api, include=["tag:auth"], auth=BearerAuth(TOKEN))
    assert (await bearer.execute("with_bearer_secure_bearer_get", {})).content == {"ok": True}
    basic = await toolset(api, include=["tag:auth"], auth=BasicAuth("ann", "pw"))
    assert (await basic.execute("with_basic_secure_basic_get", {})).content == {"user": "ann"}


async def test_credentials_do_not_cross_origins(api: ApiServer) -> None:
    ts = await toolset(
        api,
        include=["tag:debug"],
        auth=[BearerAuth(TOKEN), APIKeyAuth("X-API-Key", KEY)],
        allow_hosts=[f"localhost:{api.port}"],
    )
    here = await ts.execute("hop_here_hop_here_get", {})
    assert here.content == {"authorization": f"Bearer {TOKEN}", "key": KEY}
    there = await ts.execute("hop_hop_get", {})  # 127.0.0.1 -> localhost: another origin
    assert there.content == {"authorization": None, "key": None}
    assert api.seen[-1].path == "/echo-auth" and "authorization" not in api.seen[-1].headers


async def test_private_networks_are_refused_unless_allowed(api: ApiServer) -> None:
    with pytest.raises(OpenAPISpecError, match="loopback, private"):
        await OpenAPIToolset.from_url(f"{api.url}/openapi.json")
    shut = await toolset(api)
    closed = OpenAPIToolset(_spec_document(api), base_url=api.url)
    before = len(api.seen)
    with pytest.raises(ToolError, match="loopback, private"):
        await closed.execute("get_pet_pets__pet_id__get", {"pet_id": 1})
    assert len(api.seen) == before  # nothing reached the server
    assert (await shut.execute("get_pet_pets__pet_id__get", {"pet_id": 1})).ok


def _spec_document(api: ApiServer) -> dict[str, Any]:
    import httpx

    document: dict[str, Any] = httpx.get(f"{api.url}/openapi.json").json()
    return document


async def test_an_agent_plans_over_the_api(api: ApiServer) -> None:
    ts = await toolset(api, include=["tag:pets"])
    plan = {
        "steps": [
            {"id": "rex", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": 1}},
            {"id": "dogs", "tool": "list_pets_pets_get", "arguments": {"tag": "{{rex.tag}}"}},
        ],
        "output_steps": ["dogs"],
    }
    call = ToolCall(id="c1", name="execute_tool_plan", arguments=json.dumps(plan))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Rex is a dog."])
    result = await Agent(model=model, tools=[ts], tool_planning=True).run("Which dogs are there?")
    assert result.output == "Rex is a dog."
    offered = {t.name for t in model.requests[0].tools}
    assert {"execute_tool_plan", "get_pet_pets__pet_id__get", "list_pets_pets_get"} <= offered
    assert "with_key_secure_key_get" not in offered  # include= kept the pets operations only
    answer = str(model.requests[1].messages[-1])
    assert "Rex" in answer
    model.assert_consumed()


async def test_annotations_can_be_overridden_and_the_3_1_spec_reads(api: ApiServer) -> None:
    ts = await toolset(api, annotations={"create_pet_pets_post": ToolAnnotations(idempotent=True, cost=3)})
    a = by_name(ts)["create_pet_pets_post"].annotations
    assert a.idempotent and a.cost == 3 and a.timeout is not None
    assert _spec_document(api)["openapi"].startswith("3.1")
    # FastAPI writes `tag: str | None` as anyOf [string, null] (3.1); null is accepted
    assert isinstance(await ts.execute("list_pets_pets_get", {"tag": None}), ToolResult)


@pytest.mark.slow
async def test_code_mode_calls_the_operations(api: ApiServer) -> None:
    from toolplan.sandbox import SubprocessRunner

    ts = await toolset(api, include=["tag:pets"])
    code = (
        "pets = call_tool('list_pets_pets_get', {'limit': 10})\n"
        "first = call_tool('get_pet_pets__pet_id__get', {'pet_id': pets[0]['id']})\n"
        "set_result({'count': len(pets), 'first': first['name']})\n"
    )
    call = ToolCall(id="x1", name="execute_code", arguments=json.dumps({"code": code}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"])
    result = await Agent(model=model, tools=[ts], code_execution=SubprocessRunner()).run("count the pets")
    reply = json.loads(str(model.requests[1].messages[-1].content))
    assert reply["result"]["first"] == "Rex" and reply["result"]["count"] >= 1
    assert result.output == "done"


async def test_a_3_0_document_with_nullable_against_the_server(api: ApiServer) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Pets 3.0", "version": "1"},
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "parameters": [
                        {"name": "tag", "in": "query", "schema": {"type": "string", "nullable": True}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    ],
                }
            }
        },
    }
    ts = OpenAPIToolset(document, base_url=api.url, allow_private_networks=True)
    assert ts.definitions()[0].parameters_json_schema["properties"]["tag"]["type"] == ["string", "null"]
    everyone = await ts.execute("listPets", {"tag": None, "limit": 50})
    dogs = await ts.execute("listPets", {"tag": "dog"})
    assert {p["name"] for p in dogs.content} <= {p["name"] for p in everyone.content}
    assert all(p["tag"] == "dog" for p in dogs.content) and len(everyone.content) > len(dogs.content)
    assert api.seen[-2].query == {"limit": "50"}  # a null query argument is not sent


async def test_an_idempotency_key_goes_with_posts_when_asked(api: ApiServer) -> None:
    ts = await toolset(api, include=["tag:pets"], idempotency_header="Idempotency-Key")
    plan = {
        "steps": [
            {"id": "add", "tool": "create_pet_pets_post", "arguments": {"name": "Bo"}},
            {"id": "read", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": "$ref:add.id"}},
        ]
    }
    result = await execute_plan(plan, [ts], run_id="run-7")
    assert result.ok
    post, get = api.seen[-2], api.seen[-1]
    assert post.method == "POST" and post.headers["idempotency-key"] == "run-7:add"
    assert get.method == "GET" and "idempotency-key" not in get.headers
    plain = await toolset(api, include=["tag:pets"])
    await plain.execute("create_pet_pets_post", {"name": "Cy"})
    assert "idempotency-key" not in api.seen[-1].headers
    with pytest.raises(UserError, match="not a header name"):
        await toolset(api, idempotency_header="bad header")
