"""Save a plan that worked as a skill, then reuse it in one step: python examples/skills/save_and_reuse.py"""

import asyncio
import tempfile
from pathlib import Path

from toolplan import execute_plan, tool
from toolplan.skills import SkillTools
from toolplan.store import open_store


@tool(read_only=True)
def get_weather(city: str) -> dict:
    """The weather of a city."""
    return {"city": city, "temp": {"Oslo": 3, "Rome": 18}.get(city, 10)}


@tool(read_only=True)
def warmer(a: dict, b: dict) -> str:
    """Which of two weather reports is warmer."""
    return a["city"] if a["temp"] > b["temp"] else b["city"]


TOOLS = [get_weather, warmer]
PLAN = {  # a plan that worked, with its two cities made parameters
    "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"city": "{{params.first}}"}},
        {"id": "b", "tool": "get_weather", "arguments": {"city": "{{params.second}}"}},
        {"id": "w", "tool": "warmer", "arguments": {"a": "$ref:a", "b": "$ref:b"}},
    ],
    "output_steps": ["w"],
}


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'skills.db'}"
        async with open_store(url) as store:  # one conversation saves it
            skills = SkillTools(store, TOOLS)
            saved = await skills.skill_create(
                "warmer_city", "Which of two cities is warmer today", PLAN,
                {"first": {"type": "string"}, "second": {"type": "string"}},
            )  # fmt: skip
            print("saved", saved["name"], "version", saved["version"])

        async with open_store(url) as store:  # a later one finds it and runs it as one step
            skills = await SkillTools(store, TOOLS).load()
            print("found", [s["name"] for s in await skills.skill_search("warmer city")])
            plan = {"steps": [{"id": "pick", "tool": "skill:warmer_city",
                               "arguments": {"first": "Oslo", "second": "Rome"}}]}  # fmt: skip
            result = await execute_plan(plan, [*TOOLS, skills])
            print(result.outputs)  # {'pick': {'w': 'Rome'}}


asyncio.run(main())
