"""The planner over HTTP: ``POST /v1/requests`` with a scripted model behind the real OpenAI provider code.

The model is `toolplan.testing.FakeProvider`, a real HTTP server on 127.0.0.1 answering OpenAI
chat completions from a script; the service reaches it as it would OpenAI (``openai:scripted`` with
``OPENAI_BASE_URL``), through the openai SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from svc_http import ledger
from svc_support import ProcessServer, ThreadServer, make_key
from svc_tools import TOOLS

from toolplan import ModelPrice, SpendLimits, UserError
from toolplan.execute import WindowLimits
from toolplan.service import Service, ServiceConfig
from toolplan.store import open_store
from toolplan.testing import Canned, FakeProvider, openai_text, openai_tool_call

# Two errors: an unknown tool, and a reference to a step that does not exist.
INVALID: dict[str, Any] = {
    "steps": [
        {"id": "pay", "tool": "chrage", "arguments": {"amount": 7}},
        {"id": "total", "tool": "add", "arguments": {"a": "$ref:nowhere", "b": 2}},
    ],
    "output_steps": ["total"],
}
VALID: dict[str, Any] = {
    "steps": [
        {"id": "pay", "tool": "charge", "arguments": {"amount": 7}},
        {"id": "total", "tool": "add", "arguments": {"a": 1, "b": 2}, "depends_on": ["pay"]},
    ],
    "output_steps": ["total"],
}
QUERY = "Charge 7, then add 1 and 2."
NAMED = {"type": "function", "function": {"name": "submit_plan"}}


def submit(plan: dict[str, Any], call_id: str = "call_1") -> Canned:
    """The model's answer: a ``submit_plan`` call with ``plan``."""
    return Canned(body=openai_tool_call("submit_plan", plan, call_id=call_id))


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    """The scripted model, and the environment that points ``openai:`` models at it."""
    with FakeProvider() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
        yield fake


@pytest.fixture
def planning(db_url: str, thread_server: Callable[..., ThreadServer], provider: FakeProvider) -> ThreadServer:
    """A service in this process planning with ``openai:scripted``."""
    return thread_server(db_url, model="openai:scripted")


def codes(issues: list[dict[str, Any]]) -> set[str]:
    return {i["code"] for i in issues}


@pytest.mark.slow
def test_toolplan_serve_with_a_model_plans_repairs_once_and_runs_the_final_plan(
    spawn: Callable[..., ProcessServer],
    process_env: dict[str, str],
    provider: FakeProvider,
    db_url: str,
    tmp_path: Path,
) -> None:
    process_env |= {"OPENAI_BASE_URL": f"{provider.url}/v1", "OPENAI_API_KEY": "sk-scripted"}
    provider.queue(submit(INVALID), submit(VALID, "call_2"))
    server = spawn(db_url, "--model", "openai:scripted")
    with server.client() as c:
        r = c.post("/v1/requests", json={"query": QUERY})
        assert r.status_code == 201, r.text
        answer = r.json()
        assert len(provider.requests) == 2 and provider.unused == 0  # the plan, and exactly one repair
        assert answer["request_id"].startswith("req_") and answer["plan_id"].startswith("plan_")
        assert answer["repaired"] is True and answer["valid"] is True and answer["issues"] == []
        assert answer["plan"]["steps"] == VALID["steps"] and answer["usage"]["requests"] == 2
        request_id = answer["request_id"]

        stored = c.get(f"/v1/requests/{request_id}").json()
        assert stored["query"] == QUERY and stored["plan_id"] == answer["plan_id"]
        first, repair = stored["versions"]
        assert first["parent_id"] is None and first["valid"] is False
        assert codes(first["issues"]) == {"unknown_tool", "unknown_reference"}
        assert repair["plan_id"] == answer["plan_id"] and repair["parent_id"] == first["plan_id"]
        assert answer["parent_id"] == first["plan_id"] and repair["valid"] is True
        listed = c.get("/v1/plans", params={"request_id": request_id}).json()["items"]
        assert {p["plan_id"] for p in listed} == {first["plan_id"], repair["plan_id"]}
        assert ledger(tmp_path / "ledger.txt") == []  # planning runs nothing

        r = c.post(f"/v1/requests/{request_id}/executions", params={"wait": 30})
        assert r.status_code == 200, r.text
        execution = r.json()
        assert execution["status"] == "succeeded" and execution["outputs"] == {"total": 3}
        assert execution["plan_id"] == answer["plan_id"]
    assert ledger(tmp_path / "ledger.txt") == ["7"]


def test_what_the_planner_sends_the_provider(planning: ThreadServer, provider: FakeProvider) -> None:
    provider.queue(submit(INVALID), submit(VALID, "call_2"))
    with planning.client() as c:
        assert c.post("/v1/requests", json={"query": QUERY}).status_code == 201
    ask, repair = provider.requests
    for sent in (ask, repair):
        assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == "Bearer sk-scripted"
        body = sent.body
        assert body["model"] == "scripted" and not body.get("stream")
        assert body["tool_choice"] in ("required", NAMED)  # the plan comes as a forced submit_plan call
        assert body["parallel_tool_calls"] is False
        [tool] = body["tools"]
        assert tool["type"] == "function" and tool["function"]["name"] == "submit_plan"
        schema = json.dumps(tool["function"]["parameters"])
        assert all(f'"{name}"' in schema for name in ("add", "gate", "charge"))  # the catalogue's tools
    system, user = ask.body["messages"]
    assert system["role"] == "system" and "charge(amount)" in system["content"]
    assert user == {"role": "user", "content": QUERY}
    assert repair.body["messages"][:2] == ask.body["messages"]
    said, told = repair.body["messages"][2:]
    [call] = said["tool_calls"]
    assert said["role"] == "assistant" and call["id"] == "call_1"
    assert call["function"] == {"name": "submit_plan", "arguments": json.dumps(INVALID)}  # its own plan back
    assert told["role"] == "tool" and told["tool_call_id"] == "call_1"
    assert "[unknown_tool]" in told["content"] and "'chrage'" in told["content"]


def test_an_invalid_repair_is_422_and_runs_nothing(
    planning: ThreadServer, provider: FakeProvider, tmp_path: Path
) -> None:
    still_invalid = {"steps": [{"id": "pay", "tool": "charge", "arguments": {"amount": "seven"}}]}
    provider.queue(submit(INVALID), submit(still_invalid, "call_2"))
    with planning.client() as c:
        key = {"Idempotency-Key": "plan-it"}
        r = c.post("/v1/requests", json={"query": QUERY}, headers=key)
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["code"] == "plan_invalid" and "nothing ran" in body["message"]
        details = body["details"]
        assert details["valid"] is False and details["repaired"] is True
        assert codes(details["issues"]) == {"invalid_arguments"} and details["issues"][0]["step"] == "pay"
        assert details["plan"]["steps"] == still_invalid["steps"] and details["parent_id"] is not None
        assert len(provider.requests) == 2  # exactly one repair, however it went

        again = c.post("/v1/requests", json={"query": QUERY}, headers=key)
        assert again.status_code == 422 and again.json() == body and again.headers["Idempotent-Replayed"] == "true"
        assert len(provider.requests) == 2  # the answer was kept: the model is not asked again

        request_id = details["request_id"]
        versions = c.get(f"/v1/requests/{request_id}").json()["versions"]
        assert [v["valid"] for v in versions] == [False, False]
        assert versions[1]["parent_id"] == versions[0]["plan_id"]
        r = c.post(f"/v1/requests/{request_id}/executions", params={"wait": 5})
        assert r.status_code == 422 and r.json()["code"] == "plan_invalid"
        assert c.get("/v1/executions").json()["items"] == []  # no execution exists
    assert ledger(tmp_path / "ledger.txt") == []  # and no tool ran


def test_a_valid_first_plan_is_one_request_and_an_idempotent_post_plans_once(
    planning: ThreadServer, provider: FakeProvider
) -> None:
    provider.queue(submit(VALID))
    with planning.client() as c:
        key = {"Idempotency-Key": "once"}
        first = c.post("/v1/requests", json={"query": QUERY}, headers=key)
        again = c.post("/v1/requests", json={"query": QUERY}, headers=key)
        other = c.post("/v1/requests", json={"query": "something else"}, headers=key)
        assert first.status_code == again.status_code == 201, first.text
        assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
        assert first.json()["repaired"] is False and first.json()["parent_id"] is None
        assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
        assert len(c.get("/v1/requests").json()["items"]) == 1
    assert len(provider.requests) == 1


def test_a_plan_in_the_text_of_the_answer_is_read_too(planning: ThreadServer, provider: FakeProvider) -> None:
    provider.queue(Canned(body=openai_text(f"Here is the plan:\n```json\n{json.dumps(VALID)}\n```")))
    with planning.client() as c:
        r = c.post("/v1/requests", json={"query": QUERY})
    assert r.status_code == 201 and r.json()["plan"]["steps"] == VALID["steps"], r.text


def test_a_failing_model_is_an_error_that_says_so(planning: ThreadServer, provider: FakeProvider) -> None:
    provider.queue(Canned(status=400, body={"error": {"message": "model 'scripted' does not exist"}}))
    with planning.client() as c:
        r = c.post("/v1/requests", json={"query": QUERY})
        assert r.status_code == 502, r.text
        body = r.json()
        assert body["code"] == "model_http_error" and "does not exist" in body["message"]
        assert "Traceback" not in r.text
        assert c.get("/v1/requests").json()["items"] == []


# The scripted answers report 10 input and 5 output tokens: at these prices 0.011 a planning request.
PRICED = SpendLimits(prices={"scripted": ModelPrice(input=100.0, output=2000.0)})


def test_a_keys_model_spend_window_refuses_planning_past_its_cap(
    db_url: str, thread_server: Callable[..., ThreadServer], provider: FakeProvider
) -> None:
    window = WindowLimits(period=86_400, max_output_tokens=5, max_money=1.0)
    config = ServiceConfig(poll_interval=0.05, spend=PRICED, key_budget=window)
    server = thread_server(db_url, model="openai:scripted", config=config)
    provider.queue(submit(VALID), submit(VALID))
    with server.client() as c:
        first = c.post("/v1/requests", json={"query": QUERY})
        assert first.status_code == 201, first.text
        assert first.json()["usage"]["total_tokens"] == 15 and first.json()["money"] == pytest.approx(0.011)
        second = c.post("/v1/requests", json={"query": QUERY})
        assert second.status_code == 429, second.text
        body = second.json()
        assert body["code"] == "usage_limit_exceeded" and body["details"]["limit"] == "key_spend"
        assert "max_output_tokens=5 per 86400s for this key, 5 already written" in body["message"]
        assert len(provider.requests) == 1  # the refused request was never sent
        budget = c.get("/v1/budget").json()["key_budget"]
        assert (budget["input_tokens"], budget["output_tokens"], budget["max_output_tokens"]) == (10, 5, 5)
        assert budget["money"] == pytest.approx(0.011) and budget["money_left"] == pytest.approx(0.989)
        gql = c.post("/graphql", json={"query": "{ keyBudget { outputTokens totalTokens maxMoney } }"}).json()
        assert gql == {"data": {"keyBudget": {"outputTokens": 5, "totalTokens": 15, "maxMoney": 1.0}}}
        mutation = 'mutation { createPlanWithRequestId(query: "Add 1 and 2.") { requestId money } }'
        [error] = c.post("/graphql", json={"query": mutation}).json()["errors"]
        assert error["extensions"]["code"] == "usage_limit_exceeded"
        assert error["extensions"]["details"]["limit"] == "key_spend"
    with server.client(key=make_key(db_url, "other")) as other:  # another key has a window of its own
        r = other.post("/v1/requests", json={"query": QUERY})
        assert r.status_code == 201, r.text
    assert len(provider.requests) == 2


def test_a_cap_per_planning_request_is_429_with_what_was_spent(
    db_url: str, thread_server: Callable[..., ThreadServer], provider: FakeProvider
) -> None:
    spend = SpendLimits(max_output_tokens=5, prices=PRICED.prices)
    server = thread_server(db_url, model="openai:scripted", config=ServiceConfig(poll_interval=0.05, spend=spend))
    provider.queue(submit(INVALID), submit(VALID, "call_2"))
    with server.client() as c:
        r = c.post("/v1/requests", json={"query": QUERY})
        assert r.status_code == 429, r.text
        body = r.json()
        assert body["details"] == {
            "limit": "max_output_tokens",
            "usage": {
                "requests": 1,
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "cached_input_tokens": 0,
                "cache_write_tokens": 0,
            },
            "money": pytest.approx(0.011),
        }
        assert c.get("/v1/requests").json()["items"] == []
    assert len(provider.requests) == 1  # the repair was refused before it was sent


async def test_a_key_money_cap_needs_the_models_price(db_url: str, provider: FakeProvider) -> None:
    config = ServiceConfig(key_budget=WindowLimits(period=60, max_money=1.0))
    async with open_store(db_url) as store:
        with pytest.raises(UserError, match="no price for model 'scripted'"):
            Service(store, TOOLS, model="openai:scripted", config=config)
