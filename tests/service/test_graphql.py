"""GraphQL at /graphql against a real uvicorn server on 127.0.0.1 and a SQLite file; and its contract with REST."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import httpx
import pytest
from svc_support import ThreadServer

from toolplan.models import AssistantMessage, ToolCall
from toolplan.planner import SUBMIT_TOOL_NAME
from toolplan.service import ServiceConfig
from toolplan.testing import ScriptedModel

CHAIN = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
    ],
    "output_steps": ["b"],
}
GATED = {
    "steps": [
        {"id": "first", "tool": "charge", "arguments": {"amount": 5}},
        {"id": "wait", "tool": "gate", "arguments": {"name": "open"}, "depends_on": ["first"]},
        {"id": "last", "tool": "add", "arguments": {"a": 1, "b": 1}, "depends_on": ["wait"]},
    ]
}
BAD = {"steps": [{"id": "a", "tool": "nope", "arguments": {}}]}
WARNED = {"steps": [{"id": "a", "tool": "gate", "arguments": {"name": "{{ jinja.name }}"}}]}


def submit(plan: Any, call_id: str = "p1") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=SUBMIT_TOOL_NAME, arguments=json.dumps(plan)),))


def gql(c: httpx.Client, document: str, /, **variables: Any) -> dict[str, Any]:
    r = c.post("/graphql", json={"query": document, "variables": variables})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def data(c: httpx.Client, document: str, /, **variables: Any) -> dict[str, Any]:
    body = gql(c, document, **variables)
    assert "errors" not in body, body["errors"]
    out: dict[str, Any] = body["data"]
    return out


def error(c: httpx.Client, document: str, /, **variables: Any) -> dict[str, Any]:
    body = gql(c, document, **variables)
    assert body.get("errors"), body
    first: dict[str, Any] = body["errors"][0]
    return first


EXECUTION = "executionId planId status createdAt updatedAt calls cancelRequested outputs " + (
    "steps { id tool status output error { kind message } attempts startedAt endedAt reused usedFallback warnings "
    "sharedWith cached }"
)
PLAN = "planId plan dialect requestId parentId valid issues { code message step severity } createdAt"


def planner_server(db_url: str, *script: AssistantMessage) -> Iterator[ThreadServer]:
    s = ThreadServer(db_url, model=ScriptedModel(script)).start()
    yield s
    s.stop()


@pytest.fixture
def planning(db_url: str, gates: Path) -> Iterator[ThreadServer]:
    """A server whose model answers with CHAIN, twice."""
    yield from planner_server(db_url, submit(CHAIN), submit(CHAIN))


@pytest.fixture
def failing(db_url: str, gates: Path) -> Iterator[ThreadServer]:
    """A server whose model answers with an invalid plan, and again after the repair request."""
    yield from planner_server(db_url, submit(BAD), submit(BAD, "p2"))


# -- each query and mutation -----------------------------------------------------------------------


def test_a_plan_is_created_executed_and_read(server: ThreadServer) -> None:
    with server.client() as c:
        created = data(c, f"mutation($p: JSON!) {{ createPlan(plan: $p) {{ {PLAN} }} }}", p=CHAIN)["createPlan"]
        plan_id = created["planId"]
        assert re.fullmatch(r"plan_\d{13}_[0-9a-z]{8}", plan_id)
        assert created["plan"] == CHAIN and created["valid"] and created["dialect"] == "native"
        assert created["requestId"] is None and created["issues"] == [] and created["createdAt"] > 0

        run = data(c, f"mutation($id: String!) {{ executePlan(planId: $id, wait: 30) {{ {EXECUTION} }} }}", id=plan_id)
        e = run["executePlan"]
        assert e["status"] == "succeeded" and e["outputs"] == {"b": 13} and e["planId"] == plan_id
        steps = {s["id"]: s for s in e["steps"]}
        assert steps["a"]["output"] == 3 and steps["b"]["output"] == 13  # typed values, not JSON strings
        assert steps["b"]["error"] is None and steps["b"]["attempts"] == 1 and not steps["b"]["reused"]

        again = data(c, f"query($id: String!) {{ execution(executionId: $id) {{ {EXECUTION} }} }}", id=e["executionId"])
        assert again["execution"] == e
        assert data(c, f'{{ plan(planId: "{plan_id}") {{ {PLAN} }} }}')["plan"] == created

        listed = data(
            c, "query($p: String) { executions(planId: $p) { items { executionId status } nextCursor } }", p=plan_id
        )
        assert listed["executions"] == {
            "items": [{"executionId": e["executionId"], "status": "succeeded"}],
            "nextCursor": None,
        }
        by_status = data(c, "{ executions(status: failed) { items { executionId } } }")
        assert by_status["executions"]["items"] == []
        plans = data(c, "{ plans { items { planId valid } nextCursor } }")["plans"]
        assert plans == {"items": [{"planId": plan_id, "valid": True}], "nextCursor": None}


def test_the_steps_of_an_execution_keep_their_wire_format(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = data(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=CHAIN)["createPlan"]["planId"]
        e = data(c, f"mutation($id: String!) {{ executePlan(planId: $id, wait: 30) {{ {EXECUTION} }} }}", id=plan_id)
        steps = e["executePlan"]["steps"]
        assert all(isinstance(s["startedAt"], float) and s["endedAt"] >= s["startedAt"] for s in steps)
        common = {"tool": "add", "status": "succeeded", "error": None, "attempts": 1}
        flags = {"reused": False, "usedFallback": False, "warnings": [], "sharedWith": [], "cached": False}
        assert [{k: v for k, v in s.items() if not k.endswith("At")} for s in steps] == [
            {"id": "a", **common, "output": 3, **flags},
            {"id": "b", **common, "output": 13, **flags},
        ]


def test_without_wait_an_execution_is_queued_and_its_fields_are_read_when_asked(
    server: ThreadServer, gates: Path
) -> None:
    with server.client() as c:
        plan_id = data(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=GATED)["createPlan"]["planId"]
        e = data(
            c,
            f'mutation {{ executePlan(planId: "{plan_id}") {{ executionId status cancelRequested steps {{ id }} }} }}',
        )
        e = e["executePlan"]
        assert e["status"] == "queued" and not e["cancelRequested"]
        assert [s["id"] for s in e["steps"]] in ([], ["first", "wait", "last"])  # read after the queueing
        (gates / "open").touch()
        done = data(c, f'mutation {{ executePlan(planId: "{plan_id}", wait: 30) {{ status outputs }} }}')["executePlan"]
        assert done["status"] == "succeeded" and done["outputs"] == {
            "first": "charged 5",
            "wait": "passed open",
            "last": 2,
        }


def test_cancel_then_resume(server: ThreadServer, gates: Path, tmp_path: Path) -> None:
    with server.client() as c:
        plan_id = data(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=GATED)["createPlan"]["planId"]
        execution_id = data(c, f'mutation {{ executePlan(planId: "{plan_id}") {{ executionId }} }}')["executePlan"][
            "executionId"
        ]
        _until_step_started(c, execution_id, "wait")
        cancel = (
            "mutation($e: String!) { cancelExecution(executionId: $e) { executionId status execution { status } } }"
        )
        out = data(c, cancel, e=execution_id)["cancelExecution"]
        assert out["status"] in ("cancelling", "cancelled") and out["executionId"] == execution_id
        assert out["execution"]["status"] in ("running", "cancelled")
        stopped = _until_finished(c, execution_id)
        assert (
            data(c, f'{{ execution(executionId: "{execution_id}") {{ status }} }}')["execution"]["status"]
            == "cancelled"
        )
        (gates / "open").touch()
        resume = f'mutation {{ resumeExecution(executionId: "{execution_id}") {{ status }} }}'
        assert data(c, resume)["resumeExecution"]["status"] == "queued"
        _until_finished(c, execution_id, stopped)
        e = data(c, f'{{ execution(executionId: "{execution_id}") {{ status steps {{ id output reused }} }} }}')[
            "execution"
        ]
        assert e["status"] == "succeeded"
        steps = {s["id"]: s for s in e["steps"]}
        assert steps["first"]["output"] == "charged 5" and steps["last"]["output"] == 2
        assert {sid: s["reused"] for sid, s in steps.items()} == {"first": True, "wait": False, "last": False}
        assert (tmp_path / "ledger.txt").read_text() == "5\n"  # charged once
        finished = error(c, resume)
        assert finished["extensions"]["code"] == "run_conflict" and finished["path"] == ["resumeExecution"]


def test_a_question_is_planned_read_and_run_by_request_id(planning: ThreadServer) -> None:
    with planning.client() as c:
        draft = data(
            c,
            "mutation($q: String!) { createPlanWithRequestId(query: $q) { requestId planId parentId plan valid "
            "repaired issues { code } usage { requests inputTokens outputTokens } } }",
            q="What is 1 + 2, plus 10?",
        )["createPlanWithRequestId"]
        assert re.fullmatch(r"req_\d{13}_[0-9a-z]{8}", draft["requestId"])
        assert draft["plan"] == CHAIN and draft["valid"] and not draft["repaired"] and draft["parentId"] is None
        assert draft["usage"]["requests"] == 1 and draft["usage"]["inputTokens"] > 0
        request = data(
            c, f'{{ request(requestId: "{draft["requestId"]}") {{ query planId versions {{ planId valid }} }} }}'
        )
        assert request["request"] == {
            "query": "What is 1 + 2, plus 10?",
            "planId": draft["planId"],
            "versions": [{"planId": draft["planId"], "valid": True}],
        }
        run = "mutation($r: String!) { executeByRequestId(requestId: $r, wait: 30) { planId status outputs } }"
        assert data(c, run, r=draft["requestId"])["executeByRequestId"] == {
            "planId": draft["planId"],
            "status": "succeeded",
            "outputs": {"b": 13},
        }
        requests = data(c, "{ requests { items { requestId query versions { planId } } nextCursor } }")["requests"]
        assert [r["requestId"] for r in requests["items"]] == [draft["requestId"]]
        assert requests["items"][0]["versions"] == [{"planId": draft["planId"]}]


def test_planning_without_a_model_is_a_no_model_error(server: ThreadServer) -> None:
    with server.client() as c:
        e = error(c, 'mutation { createPlanWithRequestId(query: "hi") { requestId } }')
        assert e["extensions"]["code"] == "no_model" and "--model" in e["message"]


def test_an_invalid_plan_after_its_repair_is_a_plan_invalid_error_and_runs_nothing(failing: ThreadServer) -> None:
    with failing.client() as c:
        e = error(c, 'mutation { createPlanWithRequestId(query: "make it fail") { planId } }')
        assert e["extensions"]["code"] == "plan_invalid"
        details = e["extensions"]["details"]
        assert not details["valid"] and details["repaired"] and details["issues"][0]["code"] == "unknown_tool"
        run = error(c, f'mutation {{ executeByRequestId(requestId: "{details["request_id"]}") {{ status }} }}')
        assert run["extensions"]["code"] == "plan_invalid"
        assert data(c, "{ executions { items { executionId } } }")["executions"]["items"] == []


# -- errors and limits -----------------------------------------------------------------------------


def test_coded_errors_carry_code_and_details(server: ThreadServer) -> None:
    with server.client() as c:
        e = error(c, '{ execution(executionId: "exec_x") { status } }')
        assert e["extensions"] == {"code": "run_not_found", "details": None} and "exec_x" in e["message"]
        assert e["path"] == ["execution"]
        assert error(c, '{ plan(planId: "plan_x") { valid } }')["extensions"]["code"] == "plan_not_found"
        assert error(c, '{ request(requestId: "req_x") { query } }')["extensions"]["code"] == "plan_not_found"
        bad = error(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=BAD)
        assert bad["extensions"]["code"] == "invalid_plan"
        assert bad["extensions"]["details"][0] == {
            "code": "unknown_tool",
            "step": "a",
            "message": bad["extensions"]["details"][0]["message"],
        }
        assert error(c, "{ executions(first: 0) { nextCursor } }")["extensions"]["code"] == "invalid_request"
        assert error(c, '{ executions(after: "garbage") { nextCursor } }')["extensions"]["code"] == "user_error"
        unknown = error(c, "{ executions { items { nope } } }")
        assert unknown["extensions"]["code"] == "invalid_request" and "nope" in unknown["message"]
        assert "path" not in unknown


def test_hostile_documents_are_refused_before_they_run(server: ThreadServer) -> None:
    deep = "{ " + " { ".join(f"f{i}" for i in range(12)) + " }" * 12
    with server.client() as c:
        errors = gql(c, deep)["errors"]
        assert any("exceeds maximum operation depth of 10" in e["message"] for e in errors)
        assert {e["extensions"]["code"] for e in errors} == {"invalid_request"}
        aliases = "{ " + " ".join(f"a{i}: executions {{ nextCursor }}" for i in range(21)) + " }"
        assert "aliases" in error(c, aliases)["message"]
        tokens = "{ executions { " + "nextCursor " * 2_001 + "} }"
        assert "token" in error(c, tokens)["message"].lower()
        introspection = (
            "{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }"
        )
        assert "introspection depth" in error(c, introspection)["message"]
        assert data(c, "{ __schema { queryType { name } } }") == {"__schema": {"queryType": {"name": "Query"}}}
        nested = "{a:" * 600 + "1" + "}" * 600
        assert "nested too deeply" in error(c, f"mutation {{ createPlan(plan: {nested}) {{ planId }} }}")["message"]
        body = '{"query": "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", "variables": {"p": '
        body += "[" * 100_000 + "]" * 100_000 + "}}"
        r = c.post("/graphql", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_requests_graphql_cannot_read_are_json_errors(server: ThreadServer) -> None:
    with server.client() as c:
        r = c.post("/graphql", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "invalid_request"
        r = c.get("/graphql", params={"query": 'mutation { cancelExecution(executionId: "x") { status } }'})
        assert r.status_code == 400 and r.json()["code"] == "invalid_request" and "GET" in r.json()["message"]
        r = c.post("/graphql", json=[{"query": "{ executions { nextCursor } }"}])
        assert r.status_code == 400 and r.json()["code"] == "invalid_request"  # no batches


def test_graphql_needs_a_key_on_post_and_get(server: ThreadServer) -> None:
    query = {"query": "{ executions { nextCursor } }"}
    for key in (None, "", "tpk_nothing_here", server.key + "x"):
        headers = {} if key is None else {"X-API-Key": key}
        with httpx.Client(base_url=server.url, headers=headers) as c:
            for r in (
                c.post("/graphql", json=query),
                c.get("/graphql", params=query),
                c.get("/graphql", headers={"Accept": "text/html"}),  # a browser
            ):
                assert r.status_code == 401, r.text
                assert r.json()["code"] == "unauthorized" and "X-API-Key" in r.json()["message"]
    with server.client() as c:
        assert c.get("/graphql", params=query).json() == {"data": {"executions": {"nextCursor": None}}}
        # No IDE page (GraphiQL loads from a CDN: blank offline): a coded answer that says what to use.
        ide = c.get("/graphql", headers={"Accept": "text/html"})
        assert ide.status_code == 400 and ide.json()["code"] == "invalid_request", ide.text
        assert "no GraphQL IDE" in ide.json()["message"] and "graphiql" not in ide.text.lower()


def test_an_idempotency_key_covers_the_whole_document(server: ThreadServer) -> None:
    with server.client() as c:
        plan_id = data(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=CHAIN)["createPlan"]["planId"]
        run = f'executePlan(planId: "{plan_id}") {{ executionId }}'
        twice = f"mutation {{ one: {run} two: {run} }}"
        key = {"Idempotency-Key": "gql-1"}
        first = c.post("/graphql", json={"query": twice}, headers=key)
        again = c.post("/graphql", json={"query": twice}, headers=key)
        assert first.status_code == again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
        assert first.json() == again.json()
        ids = {v["executionId"] for v in first.json()["data"].values()}
        assert len(ids) == 2 and all(re.fullmatch(r"exec_\d{13}_[0-9a-z]{8}", i) for i in ids)
        listed = data(c, "{ executions { items { executionId } } }")["executions"]["items"]
        assert {e["executionId"] for e in listed} == ids  # two executions, not four
        other = c.post("/graphql", json={"query": twice.replace("two:", "three:")}, headers=key)
        assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
        # An error the client must fix is kept and replayed like an answer.
        missing = '{ execution(executionId: "exec_x") { status } }'
        a = c.post("/graphql", json={"query": missing}, headers={"Idempotency-Key": "gql-2"})
        b = c.post("/graphql", json={"query": missing}, headers={"Idempotency-Key": "gql-2"})
        assert a.json() == b.json() and a.json()["errors"][0]["extensions"]["code"] == "run_not_found"


def test_an_error_worth_retrying_is_not_kept_under_an_idempotency_key(db_url: str, gates: Path) -> None:
    s = ThreadServer(db_url, config=ServiceConfig(max_active_per_key=1, poll_interval=0.05)).start()
    try:
        with s.client() as c:
            plan_id = data(c, "mutation($p: JSON!) { createPlan(plan: $p) { planId } }", p=GATED)["createPlan"][
                "planId"
            ]
            run = f'mutation {{ executePlan(planId: "{plan_id}") {{ executionId }} }}'
            data(c, run)  # waits at its gate: the key's one active execution
            key = {"Idempotency-Key": "gql-busy"}
            first = c.post("/graphql", json={"query": run}, headers=key)
            assert first.json()["errors"][0]["extensions"]["code"] == "too_many_executions"
            again = c.post("/graphql", json={"query": run}, headers=key)
            assert "Idempotent-Replayed" not in again.headers  # not kept (as REST keeps no 429)
            (gates / "open").touch()
    finally:
        s.stop()


async def test_a_bug_in_a_resolver_is_logged_and_masked(caplog: pytest.LogCaptureFixture) -> None:
    from toolplan.service._graphql import SCHEMA
    from toolplan.service._graphql_types import Context

    class Broken:
        async def get_run(self, run_id: str) -> None:
            raise RuntimeError("secret internals")

    class FakeService:
        store = Broken()

    context = Context(FakeService())  # type: ignore[arg-type]
    result = await SCHEMA.execute('{ execution(executionId: "exec_1") { status } }', context_value=context)
    assert result.errors is not None
    (e,) = result.errors
    assert e.message == "The service failed unexpectedly; its log has the details."
    assert e.extensions == {"code": "internal_error", "details": None} and context.retry
    assert "secret internals" in caplog.text and "secret" not in str(e.formatted)


def test_ids_under_an_idempotency_key_are_derived_from_the_reserved_one() -> None:
    from toolplan.service._graphql_types import _Ids

    def run(reserved: str) -> list[str]:
        ids = _Ids(reserved)
        return [ids.new("plan"), ids.new("exec"), ids.new("exec")]

    first = run("gql_1700000000000_abcdefgh")
    assert first == run("gql_1700000000000_abcdefgh")  # a retry makes the same ids
    assert first[0] == "plan_1700000000000_abcdefgh" and len(set(first)) == 3
    assert all(re.fullmatch(r"(plan|exec)_1700000000000_[0-9a-z]{8}", i) for i in first)
    fresh = _Ids()
    assert fresh.new("exec") != fresh.new("exec")


def test_the_examples_of_the_docs_page_run(planning: ThreadServer) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "service-graphql.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```graphql\n(.*?)^```", page, re.DOTALL | re.MULTILINE)
    curl = re.findall(r"^  -d '(.*?)'$", page, re.MULTILINE)
    assert len(blocks) == 3 and len(curl) == 1
    with planning.client() as c:
        sent = json.loads(curl[0])
        planned = data(c, sent["query"], **sent["variables"])["createPlanWithRequestId"]
        assert planned["valid"] and planned["issues"] == []
        plan, run, status = blocks
        request_id = data(c, plan, query="What is 1 + 2, plus 10?")["createPlanWithRequestId"]["requestId"]
        execution = data(c, run, requestId=request_id)["executeByRequestId"]
        assert execution["status"] == "succeeded" and execution["outputs"] == {"b": 13}
        read = data(c, status, executionId=execution["executionId"])
        assert read["execution"]["status"] == "succeeded"
        assert read["executions"]["items"][0]["executionId"] == execution["executionId"]


# -- the contract: GraphQL and REST agree on every shared field --------------------------------------


class Schema:
    """The GraphQL schema as the server introspects it: full selections, and camelCase to snake_case."""

    def __init__(self, c: httpx.Client) -> None:
        q = "{ __schema { types { name kind fields { name args { name } type { ...T } } } } }"
        q += " fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }"
        types = data(c, q)["__schema"]["types"]
        self.fields: dict[str, dict[str, tuple[str, str]]] = {}
        for t in types:
            if t["kind"] == "OBJECT" and not t["name"].startswith("__"):
                self.fields[t["name"]] = {f["name"]: _named(f["type"]) for f in t["fields"] if not f["args"]}

    def selection(self, type_name: str) -> str:
        """Every field (without arguments) of ``type_name``, nested objects in full."""
        parts = []
        for name, (kind, inner) in self.fields[type_name].items():
            parts.append(f"{name} {{ {self.selection(inner)} }}" if kind == "OBJECT" else name)
        return " ".join(parts)

    def snake(self, value: Any, type_name: str) -> Any:
        """GraphQL's answer with REST's names (JSON scalars, such as a plan or an output, kept as they are)."""
        if isinstance(value, list):
            return [self.snake(v, type_name) for v in value]
        if value is None:
            return None
        out = {}
        for name, v in value.items():
            kind, inner = self.fields[type_name][name]
            out[re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()] = self.snake(v, inner) if kind == "OBJECT" else v
        return out


def _named(t: dict[str, Any]) -> tuple[str, str]:
    while t.get("ofType") is not None:
        t = t["ofType"]
    return t["kind"], t["name"]


def agree(rest: dict[str, Any], graphql: dict[str, Any], rest_only: AbstractSet[str] = frozenset()) -> set[str]:
    """Assert that every field both have is equal; return the shared fields."""
    assert set(rest) - set(graphql) == rest_only, "a REST field GraphQL does not have"
    shared = set(rest) & set(graphql)
    for name in shared:
        assert rest[name] == graphql[name], (name, rest[name], graphql[name])
    return shared


@pytest.mark.slow
def test_graphql_and_rest_agree_on_every_shared_field(planning: ThreadServer) -> None:
    with planning.client() as c:
        s = Schema(c)
        full = {t: s.selection(t) for t in ("Request", "Plan", "Execution", "PlanDraft", "ExecutionChange")}

        def one(query: str, field: str, type_name: str, **variables: Any) -> dict[str, Any]:
            got: dict[str, Any] = s.snake(data(c, query, **variables)[field], type_name)
            return got

        # A question planned through each API: the same draft but for its ids.
        rest_draft = c.post("/v1/requests", json={"query": "What is 1 + 2, plus 10?"}).json()
        gql_draft = one(
            f"mutation($q: String!) {{ createPlanWithRequestId(query: $q) {{ {full['PlanDraft']} }} }}",
            "createPlanWithRequestId",
            "PlanDraft",
            q="What is 1 + 2, plus 10?",
        )
        assert agree({k: v for k, v in rest_draft.items() if not k.endswith("_id")}, gql_draft) >= {"plan", "usage"}
        for request_id in (rest_draft["request_id"], gql_draft["request_id"]):
            rest = c.get(f"/v1/requests/{request_id}").json()
            graphql = one(f'{{ request(requestId: "{request_id}") {{ {full["Request"]} }} }}', "request", "Request")
            assert agree(rest, graphql) == {"request_id", "query", "plan_id", "created_at", "versions"}

        # Posted plans (one with a warning), read through each API.
        posted = c.post("/v1/plans", json={"plan": CHAIN}).json()
        created = one(
            f"mutation($p: JSON!) {{ createPlan(plan: $p) {{ {full['Plan']} }} }}", "createPlan", "Plan", p=CHAIN
        )
        assert agree({"plan": posted["plan"], "dialect": posted["dialect"]}, created) == {"plan", "dialect"}
        warned_rest = c.post("/v1/plans", json={"plan": WARNED}).json()
        warned = one(
            f"mutation($p: JSON!) {{ createPlan(plan: $p) {{ {full['Plan']} }} }}", "createPlan", "Plan", p=WARNED
        )
        assert warned["issues"] == warned_rest["warnings"] and warned["issues"][0]["severity"] == "warning"
        plan_ids = (
            posted["plan_id"],
            created["plan_id"],
            warned_rest["plan_id"],
            warned["plan_id"],
            rest_draft["plan_id"],
        )
        for plan_id in plan_ids:
            rest = c.get(f"/v1/plans/{plan_id}").json()
            graphql = one(f'{{ plan(planId: "{plan_id}") {{ {full["Plan"]} }} }}', "plan", "Plan")
            assert agree(rest, graphql) == set(rest) and len(rest) == 8

        # Executions started through each API, read through each.
        rest_run = c.post(f"/v1/plans/{posted['plan_id']}/executions", params={"wait": 30}).json()
        gql_run = one(
            f'mutation {{ executePlan(planId: "{created["plan_id"]}", wait: 30) {{ {full["Execution"]} }} }}',
            "executePlan",
            "Execution",
        )
        by_request = one(
            f"mutation($r: String!) {{ executeByRequestId(requestId: $r, wait: 30) {{ {full['Execution']} }} }}",
            "executeByRequestId",
            "Execution",
            r=gql_draft["request_id"],
        )
        for execution_id, answered in (
            (rest_run["execution_id"], rest_run),
            (gql_run["execution_id"], gql_run),
            (by_request["execution_id"], by_request),
        ):
            rest = c.get(f"/v1/executions/{execution_id}").json()
            assert rest["status"] == "succeeded"
            graphql = one(
                f'{{ execution(executionId: "{execution_id}") {{ {full["Execution"]} }} }}', "execution", "Execution"
            )
            assert agree(rest, graphql) == set(rest) and len(rest) == 11
            assert agree(rest, answered) == set(rest)

        # Listings: page by page, the same rows in the same order.
        for rest_path, field, type_name, rest_only in (
            ("/v1/executions", "executions", "Execution", {"parent_id"}),
            ("/v1/requests", "requests", "Request", set()),
            ("/v1/plans", "plans", "Plan", {"version"}),
        ):
            rest_rows: list[dict[str, Any]] = []
            gql_rows: list[dict[str, Any]] = []
            cursor: str | None = None
            while True:
                page = c.get(rest_path, params={"limit": 2} | ({"cursor": cursor} if cursor else {})).json()
                items = f"items {{ {full[type_name]} }} nextCursor"
                got = data(c, f"query($a: String) {{ {field}(first: 2, after: $a) {{ {items} }} }}", a=cursor)[field]
                assert got["nextCursor"] == page["next_cursor"]
                rest_rows += page["items"]
                gql_rows += s.snake(got["items"], type_name)
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert len(rest_rows) == len(gql_rows) >= 2
            for rest, graphql in zip(rest_rows, gql_rows, strict=True):
                agree(rest, graphql, rest_only)

        # Errors: the same code, message and details.
        finished = rest_run["execution_id"]
        for method, path, body, query in (
            ("GET", "/v1/executions/exec_x", None, '{ execution(executionId: "exec_x") { status } }'),
            ("GET", "/v1/plans/plan_x", None, '{ plan(planId: "plan_x") { valid } }'),
            ("POST", "/v1/plans", {"plan": BAD}, f"mutation {{ createPlan(plan: {_literal(BAD)}) {{ planId }} }}"),
            (
                "POST",
                f"/v1/executions/{finished}/cancel",
                None,
                f'mutation {{ cancelExecution(executionId: "{finished}") {{ status }} }}',
            ),
        ):
            rest_error = c.request(method, path, json=body).json()
            e = error(c, query)
            assert rest_error == {
                "code": e["extensions"]["code"],
                "message": e["message"],
                "details": e["extensions"]["details"],
            }


def _literal(value: Any) -> str:
    """A JSON value as a GraphQL literal (object keys unquoted)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return json.dumps(value)


# -- helpers ---------------------------------------------------------------------------------------


def _events(c: httpx.Client, execution_id: str) -> Iterator[dict[str, Any]]:
    with c.stream("GET", f"/v1/executions/{execution_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                yield json.loads(line[5:])


def _until_step_started(c: httpx.Client, execution_id: str, step_id: str) -> None:
    for event in _events(c, execution_id):
        if event["type"] == "step_started" and event["step_id"] == step_id:
            return
    raise AssertionError(f"step {step_id} never started")


def _until_finished(c: httpx.Client, execution_id: str, after: int = 0) -> int:
    """Read the execution's events after ``after`` up to the plan's end; the number of that event."""
    last = after
    with c.stream("GET", f"/v1/executions/{execution_id}/events", headers={"Last-Event-ID": str(after)}) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                last = json.loads(line[5:])["seq"]
    return last
