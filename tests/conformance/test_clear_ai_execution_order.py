"""Conformance, clear-ai's chaining planner: ``executionOrder`` orders execution, stopping at the first failure.

A clear-ai user writes ``{"tools": [...], "executionOrder": [...]}`` and expects the tools to run one
after the other in that order, the run stopping at the first failure (the rest not run, the reason
naming the failed step), unless the plan asks otherwise (``"parallel": true``, or a failure mode).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolplan import ToolError, execute_plan, parse_plan, tool, validate_plan
from toolplan.cli import app
from toolplan.plan import dump_plan

CALLS: list[str] = []


@tool
def create_user(name: str) -> dict[str, Any]:
    """Create a user."""
    CALLS.append("create_user")
    return {"id": 7, "name": name}


@tool
def create_blog(user_id: int, title: str) -> dict[str, Any]:
    """Create a blog post."""
    CALLS.append("create_blog")
    if title == "fail":
        raise ToolError("the blog service is down")
    return {"id": 1, "author": user_id}


@tool
def send_email(to: str) -> str:
    """Send an email."""
    CALLS.append("send_email")
    return f"sent to {to}"


TOOLS = [create_user, create_blog, send_email]


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def chaining(title: str = "fail", **extra: Any) -> dict[str, Any]:
    return {
        "tools": [
            {"name": "create_user", "parameters": {"name": "Ada"}},
            {"name": "send_email", "parameters": {"to": "ada@example.com"}},
            {
                "name": "create_blog",
                "parameters": {"user_id": "{{create_user.id}}", "title": title},
                "dependsOn": "create_user",
            },
        ],
        "executionOrder": ["create_user", "create_blog", "send_email"],
        **extra,
    }


async def test_steps_run_one_at_a_time_in_execution_order() -> None:
    result = await execute_plan(chaining(title="Hello"), TOOLS)
    assert result.status == "succeeded"
    assert CALLS == ["create_user", "create_blog", "send_email"]  # executionOrder, not the tools' order
    assert list(result.steps) == ["create_user", "create_blog", "send_email"]
    ends = [result.steps[s].ended_at for s in CALLS]
    starts = [result.steps[s].started_at for s in CALLS]
    assert all(e is not None and s is not None and e <= s for e, s in zip(ends, starts[1:], strict=False))


async def test_a_tool_listed_after_a_failing_one_does_not_run() -> None:
    result = await execute_plan(chaining(), TOOLS)
    assert CALLS == ["create_user", "create_blog"]
    statuses = {sid: r.status for sid, r in result.steps.items()}
    assert statuses == {"create_user": "succeeded", "create_blog": "failed", "send_email": "not_run"}
    reason = result.steps["send_email"].error
    assert reason is not None and "'create_blog' failed" in reason.message


async def test_parallel_true_asks_for_the_dataflow_run() -> None:
    sent = asyncio.Event()

    @tool(name="send_email")
    async def send_email_at_once(to: str) -> str:
        sent.set()
        return "sent"

    @tool(name="create_blog")
    async def create_blog_after_the_email(user_id: int, title: str) -> str:
        await sent.wait()  # only ends if send_email ran meanwhile: the steps overlap
        raise ToolError("the blog service is down")

    result = await execute_plan(chaining(parallel=True), [create_user, create_blog_after_the_email, send_email_at_once])
    assert result.steps["send_email"].status == "succeeded" and result.steps["create_blog"].status == "failed"
    assert parse_plan(chaining(parallel=True)).max_concurrency is None


async def test_fail_forward_keeps_the_order_and_goes_on_after_a_failure() -> None:
    result = await execute_plan(chaining(failure_mode="fail_forward"), TOOLS)
    assert CALLS == ["create_user", "create_blog", "send_email"]
    assert result.steps["send_email"].status == "succeeded"


def test_a_bad_parallel_option_is_a_coded_error() -> None:
    report = validate_plan(chaining(parallel="yes"), TOOLS)
    assert [e.code for e in report.errors] == ["invalid_field"] and "'parallel'" in report.errors[0].message


def test_a_chaining_dump_keeps_how_the_plan_runs() -> None:
    two = [
        {"id": "a", "tool": "send_email", "arguments": {"to": "x"}},
        {"id": "b", "tool": "create_user", "arguments": {"name": "y"}},
    ]
    assert dump_plan(parse_plan({"steps": two}), "chaining")["parallel"] is True  # these two may run at once
    chained = {"steps": [two[0], {**two[1], "depends_on": ["a"]}]}
    assert "parallel" not in dump_plan(parse_plan(chained), "chaining")  # one after the other anyway
    sequential = dump_plan(parse_plan(chaining()), "chaining")
    assert "parallel" not in sequential and parse_plan(sequential).max_concurrency == 1


def test_the_native_dialect_is_unchanged() -> None:
    native = {"steps": [{"id": "a", "tool": "send_email", "arguments": {"to": "x"}}]}
    assert parse_plan(native).max_concurrency is None


TOOLS_FILE = """
from toolplan import ToolError, tool


@tool
def create_user(name: str) -> dict:
    return {"id": 7, "name": name}


@tool
def create_blog(user_id: int, title: str) -> dict:
    raise ToolError("the blog service is down")


@tool
def send_email(to: str) -> str:
    return "sent"
"""


def test_the_cli_runs_the_chain_in_order_and_stops(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS_FILE, encoding="utf-8")
    (tmp_path / "plan.json").write_text(json.dumps(chaining()), encoding="utf-8")
    args = ["run", str(tmp_path / "plan.json"), "--tools", str(tmp_path / "tools.py"), "--json"]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    steps = {s["id"]: s for s in json.loads(done.stdout)["steps"]}
    assert [steps[s]["status"] for s in ("create_user", "create_blog", "send_email")] == [
        "succeeded",
        "failed",
        "not_run",
    ]
    assert "'create_blog' failed" in steps["send_email"]["error"]["message"]
