"""Ordering without "must succeed": ``after`` per step, tools on one ``resource``, ``max_concurrency: 1``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolplan import FunctionTool, PlanValidationError, ToolAnnotations, UserError, tool
from toolplan.agent import PlanTool
from toolplan.execute import execute_plan, execute_plan_stream
from toolplan.plan import dump_plan, parse_plan, validate_plan
from toolplan.tools import Toolset


class FakeShell:
    """A stateful backend: one working directory, shared by every call (the kind `resource` is for)."""

    def __init__(self) -> None:
        self.cwd = "/"
        self.log: list[str] = []
        self.busy = False
        self.overlaps = 0

    async def _enter(self, what: str, delay: float) -> None:
        if self.busy:
            self.overlaps += 1
        self.busy = True
        self.log.append(what)
        await asyncio.sleep(delay)
        self.busy = False

    async def cd(self, path: str) -> str:
        """Change the working directory."""
        await self._enter(f"cd {path}", 0.02)
        if path == "missing":
            raise FileNotFoundError(path)
        self.cwd = path
        return self.cwd

    async def ls(self) -> str:
        """List the working directory."""
        await self._enter("ls", 0.001)
        return f"files of {self.cwd}"


def shell_tools(shell: FakeShell, resource: str | None) -> Toolset:
    return Toolset([FunctionTool(shell.cd), FunctionTool(shell.ls)], resource=resource)


PLAN = {
    "steps": [
        {"id": "go", "tool": "cd", "arguments": {"path": "docs"}},
        {"id": "list", "tool": "ls", "arguments": {}},
        {"id": "bad", "tool": "cd", "arguments": {"path": "missing"}},
        {"id": "list2", "tool": "ls", "arguments": {}},
    ]
}


async def test_calls_on_one_resource_run_one_at_a_time_in_plan_order_even_when_one_fails() -> None:
    shell = FakeShell()
    result = await execute_plan(PLAN, [shell_tools(shell, "shell")])
    assert shell.log == ["cd docs", "ls", "cd missing", "ls"]
    assert shell.overlaps == 0
    assert {sid: r.status for sid, r in result.steps.items()} == {
        "go": "succeeded",
        "list": "succeeded",
        "bad": "failed",
        "list2": "succeeded",
    }
    assert result.steps["list"].output == "files of docs"
    assert result.steps["list2"].output == "files of docs"


async def test_without_a_resource_the_same_calls_race() -> None:
    shell = FakeShell()
    await execute_plan(PLAN, [shell_tools(shell, None)])
    assert shell.overlaps > 0  # all four start at once: the state each sees depends on timing


async def test_depends_on_skips_the_rest_of_the_chain_after_a_failure_and_after_does_not() -> None:
    def chain(key: str) -> dict[str, Any]:
        steps = PLAN["steps"]
        return {"steps": [{**s, key: [steps[i - 1]["id"]]} if i else s for i, s in enumerate(steps)]}

    shell = FakeShell()
    by_depends = await execute_plan(chain("depends_on"), [shell_tools(shell, None)])
    assert by_depends.steps["list2"].status == "skipped"
    shell = FakeShell()
    by_after = await execute_plan(chain("after"), [shell_tools(shell, None)])
    assert shell.log == ["cd docs", "ls", "cd missing", "ls"] and shell.overlaps == 0
    assert by_after.steps["bad"].status == "failed"
    assert by_after.steps["list2"].status == "succeeded"


async def test_a_resource_from_the_tool_decorator_and_from_annotations() -> None:
    log: list[str] = []

    @tool(resource="db")
    async def write(key: str) -> str:
        """Write."""
        log.append(f"w{key}")
        await asyncio.sleep(0.01 if key == "1" else 0)
        return key

    async def read(key: str) -> str:
        """Read."""
        log.append(f"r{key}")
        return key

    reader = FunctionTool(read, annotations=ToolAnnotations(read_only=True, resource="db"))
    plan = {
        "steps": [
            {"id": "a", "tool": "write", "arguments": {"key": "1"}},
            {"id": "b", "tool": "read", "arguments": {"key": "1"}},
            {"id": "c", "tool": "write", "arguments": {"key": "2"}},
        ]
    }
    await execute_plan(plan, [write, reader])
    assert log == ["w1", "r1", "w2"]
    assert write.definition.annotations.resource == "db"


def test_a_resource_must_be_a_name() -> None:
    with pytest.raises(UserError, match="resource"):
        ToolAnnotations(resource=" ")


def test_a_toolset_resource_leaves_a_function_s_own_alone() -> None:
    async def other(x: int) -> int:
        """Other."""
        return x

    shell = FakeShell()
    own = FunctionTool(other, annotations=ToolAnnotations(resource="net"))
    tools = Toolset([FunctionTool(shell.cd), own], resource="fs")
    assert {d.name: d.annotations.resource for d in tools.definitions()} == {"cd": "fs", "other": "net"}


async def test_max_concurrency_one_runs_the_plan_in_plan_order() -> None:
    log: list[str] = []

    @tool
    async def work(name: str, delay: float) -> str:
        """Work a while."""
        log.append(f"start {name}")
        await asyncio.sleep(delay)
        log.append(f"end {name}")
        if name == "b":
            raise RuntimeError("b fails")
        return name

    steps = [
        {"id": n, "tool": "work", "arguments": {"name": n, "delay": d}}
        for n, d in [("a", 0.03), ("b", 0.0), ("c", 0.02), ("d", 0.0)]
    ]
    result = await execute_plan({"steps": steps, "max_concurrency": 1}, [work])
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c", "start d", "end d"]
    assert [r.status for r in result.steps.values()] == ["succeeded", "failed", "succeeded", "succeeded"]


def test_after_is_validated_like_depends_on() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "arguments": {}, "after": ["a", "nope"]},
            {"id": "b", "tool": "t", "arguments": {}, "after": "c"},
            {"id": "c", "tool": "t", "arguments": {"x": "$ref:b"}},
            {"id": "d", "tool": "t", "arguments": {}, "after": 5},
        ]
    }
    report = validate_plan(plan)
    found = {(e.code, e.step) for e in report.errors}
    assert found == {
        ("self_reference", "a"),
        ("unknown_dependency", "a"),
        ("cycle", "b"),
        ("invalid_field", "d"),
    }
    cycle = next(e for e in report.errors if e.code == "cycle")
    assert "b -> c -> b" in cycle.message


def test_after_round_trips_through_every_dialect_that_can_say_it() -> None:
    plan = parse_plan(
        {
            "steps": [
                {"id": "a", "tool": "cd", "arguments": {"path": "x"}},
                {"id": "b", "tool": "ls", "arguments": {}, "after": ["a"]},
            ]
        }
    )
    assert plan.step("b").after == ("a",)
    assert plan.to_dict()["steps"][1]["after"] == ["a"]
    chaining = dump_plan(plan, "chaining")
    assert chaining["tools"][1] == {"name": "ls", "parameters": {}, "runAfter": ["cd"]}
    back = parse_plan(chaining)
    assert back.step("ls").after == ("cd",) and back.step("ls").depends_on == ()
    with pytest.raises(PlanValidationError, match="waits for 'a'"):
        dump_plan(plan, "batch")


def test_chaining_execution_order_must_respect_run_after() -> None:
    data = {"tools": [{"name": "cd", "parameters": {}}, {"name": "ls", "parameters": {}, "runAfter": "cd"}]}
    assert validate_plan({**data, "executionOrder": ["cd", "ls"]}).ok
    report = validate_plan({**data, "executionOrder": ["ls", "cd"]})
    assert [e.code for e in report.errors] == ["invalid_execution_order"]


def test_after_that_repeats_a_dependency_is_the_dependency() -> None:
    compiled = validate_plan(
        {
            "steps": [
                {"id": "a", "tool": "t", "arguments": {}},
                {"id": "b", "tool": "t", "arguments": {"x": "$ref:a"}, "after": ["a"]},
            ]
        }
    ).compiled
    assert compiled is not None
    assert compiled.deps["b"] == ("a",) and compiled.after == {}


def test_the_plan_tool_tells_the_model_about_after_max_concurrency_and_shared_state() -> None:
    definition = PlanTool([]).definitions()[0]
    schema = definition.parameters_json_schema
    step = schema["properties"]["steps"]["items"]["properties"]
    assert "whatever their outcome" in step["after"]["description"]
    assert schema["properties"]["max_concurrency"] == {
        "type": "integer",
        "minimum": 1,
        "description": "Most steps running at once; 1 runs the steps one at a time, in plan order.",
    }
    assert '"after"' in definition.description and '"max_concurrency": 1' in definition.description
    assert "share state" in definition.description


async def _pieces(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 7):
        yield text[i : i + 7]
        await asyncio.sleep(0)


async def test_a_streamed_plan_keeps_after_and_resource_order() -> None:
    shell = FakeShell()
    plan = {
        "steps": [
            {"id": "go", "tool": "cd", "arguments": {"path": "docs"}},
            {"id": "list", "tool": "ls", "arguments": {}},
            {"id": "bad", "tool": "cd", "arguments": {"path": "missing"}},
            {"id": "list2", "tool": "ls", "arguments": {}, "after": ["bad"]},
        ]
    }
    result = await execute_plan_stream(_pieces(json.dumps(plan)), [shell_tools(shell, "shell")])
    assert shell.log == ["cd docs", "ls", "cd missing", "ls"] and shell.overlaps == 0
    assert result.steps["list2"].status == "succeeded"


async def test_a_step_that_uses_a_later_step_on_the_same_resource_does_not_deadlock() -> None:
    """Plan order is kept where the plan's own edges allow; here 'first' needs 'second''s output."""
    shell = FakeShell()
    plan = {
        "steps": [
            {"id": "first", "tool": "cd", "arguments": {"path": "{{second}}"}},
            {"id": "second", "tool": "ls", "arguments": {}},
        ]
    }
    result = await asyncio.wait_for(execute_plan(plan, [shell_tools(shell, "shell")]), 5)
    assert shell.log == ["ls", "cd files of /"]
    assert result.status == "succeeded"
