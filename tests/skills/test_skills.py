from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from toolplan import PlanValidationError, ToolError, execute_plan, tool
from toolplan.skills import SkillTools
from toolplan.store import open_store

CALLS: list[str] = []


@tool(read_only=True)
def get_weather(city: str) -> dict[str, object]:
    """The weather of a city."""
    CALLS.append(city)
    temps = {"Oslo": 3, "Rome": 18, "Lima": 22}
    if city not in temps:
        raise ToolError(f"Unknown city {city!r}.")
    return {"city": city, "temp": temps[city]}


@tool(read_only=True)
def warmer(a: dict[str, object], b: dict[str, object]) -> str:
    """Which of two weather reports is warmer."""
    return str(a["city"] if int(str(a["temp"])) > int(str(b["temp"])) else b["city"])


@tool(destructive=True)
def send(text: str) -> str:
    """Send a message."""
    return f"sent {text}"


TOOLS = [get_weather, warmer, send]
PAIR = {
    "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"city": "{{params.first}}"}},
        {"id": "b", "tool": "get_weather", "arguments": {"city": "{{params.second}}"}},
        {"id": "w", "tool": "warmer", "arguments": {"a": "$ref:a", "b": "$ref:b"}},
    ],
    "output_steps": ["w"],
}
PARAMS = {"first": {"type": "string"}, "second": {"type": "string"}}


async def test_a_saved_plan_runs_as_one_step_of_another_plan(store_url: str) -> None:
    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS)
        saved = await skills.skill_create("warmer_city", "Which of two cities is warmer today", PAIR, PARAMS)
        assert saved["version"] == 1 and saved["parameters"]["required"] == ["first", "second"]
        plan = {
            "steps": [
                {"id": "pick", "tool": "skill:warmer_city", "arguments": {"first": "Oslo", "second": "Rome"}},
                {"id": "tell", "tool": "send", "arguments": {"text": "{{pick.w}} is warmer"}},
            ]
        }
        result = await execute_plan(plan, [*TOOLS, skills])
        assert result.ok, result.errors
        assert result.steps["pick"].output == {"w": "Rome"} and result.steps["tell"].output == "sent Rome is warmer"
        # In another process (a new conversation), the skill is found and run again.
        again = await SkillTools(store, TOOLS).load()
        assert again.skills == ["warmer_city"]
        assert await again.skill_run("warmer_city", {"first": "Lima", "second": "Rome"}) == {"w": "Lima"}
        (definition,) = [d for d in again.definitions() if d.name == "skill:warmer_city"]
        assert definition.annotations.read_only and definition.annotations.idempotent


async def test_update_keeps_versions_and_search_finds_by_words(store_url: str) -> None:
    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS)
        await skills.skill_create("warmer_city", "Which of two cities is warmer", PAIR, PARAMS)
        await skills.skill_create(
            "notify", "Send a message to the team", {"steps": [{"id": "s", "tool": "send",
                                                                  "arguments": {"text": "{{params.text}}"}}]},
            {"text": {"type": "string"}},
        )  # fmt: skip
        updated = await skills.skill_update("warmer_city", description="Compare the temperature of two cities")
        assert updated["version"] == 2 and updated["plan"] == PAIR
        (hit, *_) = await skills.skill_search("temperature of cities")
        assert hit["name"] == "warmer_city" and hit["version"] == 2 and hit["score"] > 0
        assert [h["name"] for h in await skills.skill_search("message")] == ["notify"]
        assert await skills.skill_search("quantum chromodynamics") == []
        assert [h["name"] for h in await skills.skill_search("")] == ["notify", "warmer_city"]
        notify = next(d for d in skills.definitions() if d.name == "skill:notify")
        assert notify.annotations.destructive and not notify.annotations.read_only
        first = await skills.rows.get("warmer_city", 1)
        assert first is not None and first.description == "Which of two cities is warmer"


class WordVectors:
    """An embedder whose vectors put synonyms together (what a real model does), with an async embed()."""

    AXES = (("hot", "warm", "warmer", "temperature", "heat"), ("message", "send", "notify", "tell"))

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        await asyncio.sleep(0)
        return [[float(sum(w in t.lower() for w in axis)) + 0.01 for axis in self.AXES] for t in texts]


async def test_search_by_meaning_with_an_embedder(store_url: str) -> None:
    async with open_store(store_url) as store:
        plain = SkillTools(store, TOOLS)  # saved without an embedder: its vector is made at the first search
        await plain.skill_create("warmer_city", "Which of two cities is warmer", PAIR, PARAMS)
        embedder = WordVectors()
        skills = SkillTools(store, TOOLS, embed=embedder)
        await skills.skill_create(
            "notify", "Tell the team", {"steps": [{"id": "s", "tool": "send", "arguments": {"text": "hi"}}]}
        )
        (hit, *rest) = await skills.skill_search("heat")  # no word in common with either description
        assert hit["name"] == "warmer_city" and hit["score"] > rest[0]["score"]
        stored = await skills.rows.get("warmer_city")
        assert stored is not None and stored.embedding is not None


async def test_hostile_skills_are_refused_with_what_to_do(store_url: str) -> None:
    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS)
        missing = {"steps": [{"id": "x", "tool": "format_disk", "arguments": {}}]}
        with pytest.raises(ToolError, match="format_disk"):
            await skills.skill_create("bad", "uses a tool that is not there", missing)
        undeclared = {"steps": [{"id": "a", "tool": "get_weather", "arguments": {"city": "{{params.city}}"}}]}
        with pytest.raises(ToolError, match=r"\{\{params.city\}\}.*declare"):
            await skills.skill_create("undeclared", "d", undeclared)
        with pytest.raises(ToolError, match="name must be"):
            await skills.skill_create("no spaces allowed", "d", PAIR, PARAMS)
        with pytest.raises(ToolError, match="at most"):
            await skills.skill_create("big", "d", {"steps": [{"id": "a", "tool": "send",
                                                             "arguments": {"text": "x" * 300_000}}]})  # fmt: skip
        with pytest.raises(ToolError, match=r"execute_tool_plan|meta"):
            await skills.skill_create("meta", "d", {"steps": [{"id": "a", "tool": "execute_tool_plan",
                                                              "arguments": {}}]})  # fmt: skip
        await skills.skill_create("warmer_city", "d", PAIR, PARAMS)
        with pytest.raises(ToolError, match="exists already"):
            await skills.skill_create("warmer_city", "d", PAIR, PARAMS)
        with pytest.raises(ToolError, match="No skill"):
            await skills.skill_update("nothing", description="x")
        with pytest.raises(ToolError, match="second"):
            await skills.skill_run("warmer_city", {"first": "Oslo"})
        with pytest.raises(ToolError, match=r"failed: step 'a'.*Atlantis"):
            await skills.skill_run("warmer_city", {"first": "Atlantis", "second": "Rome"})
        assert await skills.skill_search("") == [
            {"name": "warmer_city", "version": 1, "description": "d", "parameters": (await skills.skill_search())[0]
             ["parameters"]}
        ]  # fmt: skip


async def test_a_plan_step_with_wrong_skill_arguments_is_invalid_before_anything_runs(store_url: str) -> None:
    from toolplan import PlanValidationError

    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS)
        await skills.skill_create("warmer_city", "d", PAIR, PARAMS)
        CALLS.clear()
        plan = {"steps": [{"id": "p", "tool": "skill:warmer_city", "arguments": {"first": 1}}]}
        with pytest.raises(PlanValidationError, match="second"):
            await execute_plan(plan, [*TOOLS, skills])
        assert CALLS == []


async def test_a_failing_skill_step_is_a_business_error_and_skills_nest_only_so_deep(store_url: str) -> None:
    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS, max_depth=2)
        await skills.skill_create("warmer_city", "d", PAIR, PARAMS)
        result = await execute_plan(
            {"steps": [{"id": "p", "tool": "skill:warmer_city", "arguments": {"first": "Mars", "second": "Rome"}}]},
            [*TOOLS, skills],
        )
        error = result.steps["p"].error
        assert error is not None and error.kind == "business" and "Mars" in error.message
        nested = {"steps": [{"id": "n", "tool": "skill:warmer_city",
                             "arguments": {"first": "{{params.x}}", "second": "Rome"}}]}  # fmt: skip
        await skills.skill_create("outer", "calls a skill", nested, {"x": {"type": "string"}})
        twice = {"steps": [{"id": "o", "tool": "skill:outer", "arguments": {"x": "{{params.x}}"}}]}
        await skills.skill_create("outermost", "calls a skill calling a skill", twice, {"x": {"type": "string"}})
        assert await skills.skill_run("outer", {"x": "Lima"}) == {"n": {"w": "Lima"}}
        with pytest.raises(ToolError, match="2 deep"):
            await skills.skill_run("outermost", {"x": "Lima"})


async def test_a_skill_runs_within_the_calling_steps_deadline(store_url: str) -> None:
    @tool
    async def slow(x: int) -> int:
        """Take a long time."""
        await asyncio.Event().wait()
        return x

    async with open_store(store_url) as store:
        skills = SkillTools(store, [slow])
        await skills.skill_create("slowly", "d", {"steps": [{"id": "s", "tool": "slow", "arguments": {"x": 1}}]})
        plan = {"steps": [{"id": "p", "tool": "skill:slowly", "arguments": {}, "timeout": 0.2}]}
        result = await execute_plan(plan, [slow, skills])
        assert not result.ok and result.steps["p"].status in ("failed", "timed_out")


@pytest.mark.slow
async def test_skills_list_and_run_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(
        "def get_weather(city: str) -> dict:\n"
        "    '''The weather of a city.'''\n"
        "    return {'city': city, 'temp': len(city)}\n\n\n"
        "def warmer(a: dict, b: dict) -> str:\n"
        "    '''Which is warmer.'''\n"
        "    return a['city'] if a['temp'] > b['temp'] else b['city']\n",
        encoding="utf-8",
    )
    url = f"sqlite:///{tmp_path / 'skills.db'}"
    async with open_store(url) as store:
        await SkillTools(store, TOOLS).skill_create("warmer_city", "Which of two cities is warmer", PAIR, PARAMS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "toolplan", "skills", *args, "--db", url]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)

    listed = await asyncio.to_thread(cli, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["name"] for s in json.loads(listed.stdout)] == ["warmer_city"]
    ran = await asyncio.to_thread(cli, "run", "warmer_city", "-p", "first=Reykjavik", "-p", "second=Rome",
                                  "--tools", "tools.py")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"w": "Reykjavik"}
    bad = await asyncio.to_thread(cli, "run", "warmer_city", "-p", "first=Oslo", "--tools", "tools.py")
    assert bad.returncode == 2 and bad.stderr.startswith("Error: ") and "second" in bad.stderr


async def test_without_steps_only_names_model_apis_take_are_offered(store_url: str) -> None:
    import re

    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS, steps=False)
        await skills.skill_create("warmer_city", "d", PAIR, PARAMS)
        names = [d.name for d in skills.definitions()]
        assert names == ["skill_create", "skill_update", "skill_search", "skill_run"]
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names)
        params = {"first": "Oslo", "second": "Rome"}
        plan = {"steps": [{"id": "r", "tool": "skill_run", "arguments": {"name": "warmer_city", "params": params}}]}
        result = await execute_plan(plan, [*TOOLS, skills])
        assert result.ok and result.steps["r"].output == {"w": "Rome"}


async def test_an_agent_saves_a_plan_in_one_conversation_and_reuses_it_in_the_next(store_url: str) -> None:
    from toolplan.agent import Agent
    from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
    from toolplan.testing import ScriptedModel

    def call(name: str, arguments: Mapping[str, object]) -> AssistantMessage:
        return AssistantMessage(tool_calls=(ToolCall(id="c1", name=name, arguments=json.dumps(arguments)),))

    save = {"name": "warmer_city", "description": "Which of two cities is warmer", "plan": PAIR,
            "parameters": PARAMS}  # fmt: skip
    async with open_store(store_url) as store:
        first = ScriptedModel([call("skill_create", save), "Saved."])
        agent = Agent(model=first, tools=[*TOOLS, SkillTools(store, TOOLS, steps=False)], tool_planning=True)
        assert (await agent.run("remember how to compare two cities")).output == "Saved."

        second = ScriptedModel([
            call("skill_search", {"query": "warmer cities"}),
            call("skill_run", {"name": "warmer_city", "params": {"first": "Lima", "second": "Oslo"}}),
            "Lima is warmer.",
        ])  # fmt: skip
        skills = SkillTools(store, TOOLS, steps=False)
        agent = Agent(model=second, tools=[*TOOLS, skills], tool_planning=True)
        result = await agent.run("which is warmer, Lima or Oslo?")
        assert result.output == "Lima is warmer."
        second.assert_consumed()
        found, ran = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
        assert json.loads(str(found.content))[0]["name"] == "warmer_city"
        assert json.loads(str(ran.content)) == {"w": "Lima"} and not ran.is_error


@pytest.mark.parametrize("bad", [10**400, "seven", None, float("nan"), float("inf")])
async def test_an_embedders_unusable_number_is_a_clear_value_error(bad: object) -> None:
    from toolplan.skills._search import embed_texts

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[0.5, bad] for _ in texts]  # type: ignore[list-item]  # what a broken embedder returns

    with pytest.raises(ValueError, match="not all finite numbers"):
        await embed_texts(embed, ["a skill"])


async def test_a_plan_step_saves_a_plan_with_references_escaped_or_as_text(store_url: str) -> None:
    escaped = json.loads(json.dumps(PAIR).replace("$ref:", "$$ref:"))
    async with open_store(store_url) as store:
        skills = SkillTools(store, TOOLS)
        unescaped = {"steps": [{"id": "s", "tool": "skill_create", "arguments": {
            "name": "w1", "description": "Warmer", "plan": PAIR, "parameters": PARAMS}}]}  # fmt: skip
        with pytest.raises(PlanValidationError, match="'\\$ref:a' refers to step 'a'"):
            await execute_plan(unescaped, [*TOOLS, skills])  # the calling plan's references: nothing saved
        assert await skills.skill_search() == []
        save = {"steps": [
            {"id": "s1", "tool": "skill_create", "arguments": {
                "name": "w1", "description": "Warmer", "plan": escaped, "parameters": PARAMS}},
            {"id": "s2", "tool": "skill_create", "arguments": {
                "name": "w2", "description": "Warmer", "plan": json.dumps(PAIR), "parameters": PARAMS}},
        ]}  # fmt: skip
        assert (await execute_plan(save, [*TOOLS, skills])).ok
        for name in ("w1", "w2"):
            row = await skills.rows.get(name)
            assert row is not None and row.plan == PAIR  # saved as written
            assert await skills.skill_run(name, {"first": "Lima", "second": "Oslo"}) == {"w": "Lima"}
