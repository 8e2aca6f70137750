"""Saved plans ("skills"): a plan that worked, saved under a name, found again and run as one step.

```python
from toolplan import execute_plan
from toolplan.skills import SkillTools
from toolplan.store import open_store

async with open_store("sqlite:///runs.db") as store:
    skills = await SkillTools(store, tools).load()     # skill_create/update/search/run, and skill:NAME
    await skills.skill_create("weather_pair", "Compare the weather of two cities", plan, parameters)
    await execute_plan({"steps": [{"id": "w", "tool": "skill:weather_pair",
                                   "arguments": {"a": "Oslo", "b": "Rome"}}]}, [*tools, skills])
```

See docs/skills.md.
"""

from ._search import Embedder as Embedder
from ._search import EmbedFunction as EmbedFunction
from ._tools import SKILL_PREFIX as SKILL_PREFIX
from ._tools import SkillTools as SkillTools

__all__ = (
    "SKILL_PREFIX",
    "EmbedFunction",
    "Embedder",
    "SkillTools",
)
