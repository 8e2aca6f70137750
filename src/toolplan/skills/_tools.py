"""`SkillTools`: save a plan that worked under a name, find it again, and run it as one step ``skill:NAME``."""

from __future__ import annotations

import contextvars
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._context import current_call_or_none
from .._errors import InvalidToolSchemaError, PlanValidationError, ToolError, UnknownToolError
from .._json import dumps, loads
from ..execute import PlanResult, RunLimits, execute_plan
from ..plan import compile_plan
from ..store import Store
from ..tools import FunctionTool, ToolAnnotations, ToolDefinition, ToolRegistry, ToolResult, Toolset, ToolsLike
from ..tools._internal import check_for
from ._search import Embedder, EmbedFunction, cosine, embed_texts, lexical_score, skill_text
from ._store import SkillRow, SkillStore
from ._template import declared, fill, sample_values, used

__all__ = ("SKILL_PREFIX", "SkillTools")

#: A plan step runs skill NAME as ``{"tool": "skill:NAME", "arguments": {...its parameters}}``.
SKILL_PREFIX = "skill:"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")
_MAX_DESCRIPTION = 2000
_MAX_PLAN_CHARS = 256 * 1024
_MAX_SEARCH = 50
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("toolplan_skill_depth", default=0)


class SkillTools(Toolset):
    """Saved plans ("skills"): ``skill_create``, ``skill_update``, ``skill_search``, ``skill_run``, and ``skill:NAME``.

    A skill is a validated plan template with a name, a description and parameters (its
    arguments may use ``{{params.x}}``). Each version is kept; the newest is the skill. A plan runs
    one as a step ``{"tool": "skill:NAME", "arguments": {...}}`` (once `load` has read the skills;
    ``skill_create`` adds its own at once), a model with ``skill_run``. The skill's plan runs as a
    nested plan with ``tools``, under ``limits`` and within the calling step's deadline; its result
    is ``{output step id: output}``.

    Args:
        store: The store the skills live in.
        tools: The tools skills may call (a skill's plan naming another tool is refused when saved).
        embed: Find skills by meaning too: an object with ``embed(texts)`` or a function
            ``(texts) -> vectors``, sync or async. Without it, search is by words.
        limits: The limits of each skill run (its plan's own limits can only tighten them).
        max_depth: How deep skills may call skills.
        steps: Offer ``skill:NAME`` per skill. Model APIs (OpenAI, Anthropic) refuse a function
            name with ``:``: give an `Agent` ``steps=False``, and its model (and its plans) call
            skills with ``skill_run``.
        prefix: Put in front of the management functions' names (see `Toolset`).
    """

    def __init__(
        self,
        store: Store,
        tools: ToolsLike,
        *,
        embed: Embedder | EmbedFunction | None = None,
        limits: RunLimits | None = None,
        max_depth: int = 3,
        steps: bool = True,
        prefix: str = "",
    ) -> None:
        self.rows = SkillStore(store)
        self.steps = steps
        self.tools = ToolRegistry.of(tools)
        self.embedder = embed
        self.limits = limits or RunLimits()
        self.max_depth = max_depth
        self._skills: dict[str, SkillRow] = {}
        self._step_definitions: dict[str, ToolDefinition] = {}
        super().__init__(
            [
                FunctionTool(self.skill_create, annotations=ToolAnnotations()),
                FunctionTool(self.skill_update, annotations=ToolAnnotations()),
                FunctionTool(self.skill_search, annotations=ToolAnnotations(read_only=True, idempotent=True)),
                FunctionTool(self.skill_run, annotations=ToolAnnotations()),
            ],
            prefix=prefix,
        )

    async def load(self) -> SkillTools:
        """Read the stored skills, so plans can name them as ``skill:NAME``; returns self."""
        for row in await self.rows.latest():
            self._know(row)
        return self

    @property
    def skills(self) -> list[str]:
        """The names of the skills known to plans (``skill:`` left out)."""
        return list(self._skills)

    def _know(self, row: SkillRow) -> None:
        self._skills[row.name] = row
        self._step_definitions[SKILL_PREFIX + row.name] = ToolDefinition(
            name=SKILL_PREFIX + row.name,
            description=row.description,
            parameters_json_schema=row.parameters,
            annotations=self._annotations(row),
        )

    def _annotations(self, row: SkillRow) -> ToolAnnotations:
        """Read-only (idempotent, destructive) when all (all, any) of the tools its plan calls are."""
        found = [self._annotation_of(str(s.get("tool", ""))) for s in row.plan.get("steps", []) if isinstance(s, dict)]
        return ToolAnnotations(
            read_only=bool(found) and all(a.read_only for a in found),
            idempotent=bool(found) and all(a.idempotent or a.read_only for a in found),
            destructive=any(a.destructive for a in found),
        )

    def _annotation_of(self, tool: str) -> ToolAnnotations:
        if tool in self._step_definitions:
            return self._step_definitions[tool].annotations
        definition = self.tools.get(tool)
        return definition.annotations if definition is not None else ToolAnnotations(destructive=True)

    # -- the Tool protocol, with one function per skill -------------------------------------------

    def definitions(self) -> Sequence[ToolDefinition]:
        """The management functions, then ``skill:NAME`` for every skill known (unless ``steps=False``)."""
        if not self.steps:
            return super().definitions()
        return [*super().definitions(), *self._step_definitions.values()]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run ``skill:NAME``, or call a management function."""
        if name.startswith(SKILL_PREFIX) and self.steps:
            return ToolResult(content=await self.skill_run(name[len(SKILL_PREFIX) :], dict(arguments)))
        return await super().execute(name, arguments)

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Problems with a call's literal arguments (for ``skill:NAME``: against its parameters)."""
        if not (name.startswith(SKILL_PREFIX) and self.steps):
            return super().argument_problems(name, arguments, deferred)
        row = self._skills.get(name[len(SKILL_PREFIX) :])
        if row is None:
            return [str(UnknownToolError(name, self.names + list(self._step_definitions)))]
        return _problems(row.parameters, arguments, deferred)

    # -- the model-facing functions ---------------------------------------------------------------

    async def skill_create(
        self, name: str, description: str, plan: dict[str, Any] | str, parameters: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Save a plan that worked as a reusable skill; later plans run it as one step {"tool": "skill:NAME"}.

        Args:
            name: The skill's name: letters, digits, _ and - (at most 48).
            description: What it does and when to use it (used to find it).
            plan: The plan (execute_tool_plan's format); its arguments may use {{params.x}}. As a step
                of another plan, write $$ref: for each $ref: (or give the plan as JSON text).
            parameters: JSON Schema of the parameters ({"type": "object", "properties": {...}}),
                or a map of parameter name to schema.
        """
        row = await self._save(name, description, plan, parameters, new=True)
        return row.to_dict()

    async def skill_update(
        self,
        name: str,
        description: str | None = None,
        plan: dict[str, Any] | str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Save a new version of a skill; what is left out stays as it was. Earlier versions are kept.

        Args:
            name: The skill's name.
            description: A new description.
            plan: A new plan.
            parameters: New parameters (JSON Schema).
        """
        current = await self.rows.get(name) if isinstance(name, str) and _NAME.fullmatch(name) else None
        if current is None:
            raise ToolError(f"No skill named {str(name)[:60]!r}: make it with skill_create (skill_search lists them).")
        row = await self._save(
            name,
            description if description is not None else current.description,
            plan if plan is not None else current.plan,
            parameters if parameters is not None else current.parameters,
            new=False,
        )
        return row.to_dict()

    async def skill_search(self, query: str = "", limit: int = 5) -> list[dict[str, Any]]:
        """Find saved skills by what they do. An empty query lists them all by name.

        Args:
            query: What the skill should do, in a few words.
            limit: Most skills returned.
        """
        limit = max(1, min(int(limit), _MAX_SEARCH))
        rows = await self.rows.latest()
        for row in rows:
            self._know(row)
        query = (query or "").strip()[:500]
        if not query:
            return [_found(row, None) for row in rows[:limit]]
        scores = {row.name: lexical_score(query, skill_text(row)) for row in rows}
        if self.embedder is not None and rows:
            rows = await self._with_embeddings(rows)
            (q,) = await embed_texts(self.embedder, [query])
            for row in rows:
                similarity = cosine(q, row.embedding or [])
                scores[row.name] = 0.6 * max(similarity, 0.0) + 0.4 * scores[row.name]
        ranked = sorted((r for r in rows if scores[r.name] > 0), key=lambda r: (-scores[r.name], r.name))
        return [_found(row, scores[row.name]) for row in ranked[:limit]]

    async def skill_run(self, name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a saved skill with its parameters; returns {output step id: output}.

        Args:
            name: The skill's name.
            params: Its parameters.
        """
        row = self._skills.get(name) if isinstance(name, str) else None
        if row is None and isinstance(name, str) and _NAME.fullmatch(name):
            row = await self.rows.get(name)
            if row is not None:
                self._know(row)
        if row is None:
            raise ToolError(f"No skill named {str(name)[:60]!r}: skill_search lists the skills.")
        params = dict(params or {})
        problems = _problems(row.parameters, params, frozenset())
        if problems:
            raise ToolError(f"Skill {name!r} cannot run with these parameters: {'; '.join(problems)}")
        depth = _DEPTH.get()
        if depth >= self.max_depth:
            raise ToolError(f"Skill {name!r} is {depth} skills deep: skills may call skills {self.max_depth} deep.")
        token = _DEPTH.set(depth + 1)
        try:
            result = await execute_plan(fill(row.plan, params), self._registry(), limits=self._run_limits())
        except PlanValidationError as exc:  # a tool it needs is gone, or a parameter broke it
            raise ToolError(f"Skill {name!r} v{row.version} is not valid now: {_issues(exc)}") from exc
        finally:
            _DEPTH.reset(token)
        if not result.ok:
            raise ToolError(f"Skill {name!r} v{row.version} failed: {_failures(result)}")
        return result.outputs

    # -- helpers ----------------------------------------------------------------------------------

    async def _save(
        self, name: str, description: str, plan: dict[str, Any] | str, parameters: Any, *, new: bool
    ) -> SkillRow:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ToolError("name must be 1-48 letters, digits, _ or - (it becomes the step tool 'skill:NAME').")
        if not isinstance(description, str) or not description.strip() or len(description) > _MAX_DESCRIPTION:
            raise ToolError(f"description must say what the skill does, in at most {_MAX_DESCRIPTION} characters.")
        text = plan if isinstance(plan, str) else dumps(plan)
        if len(text) > _MAX_PLAN_CHARS:
            raise ToolError(f"The plan is {len(text)} characters; a skill's plan may have at most {_MAX_PLAN_CHARS}.")
        try:
            data = loads(text)
        except ValueError as exc:
            raise ToolError(f"plan is not JSON: {exc}. Pass the plan as an object or as JSON text.") from exc
        if not isinstance(data, dict):
            raise ToolError("plan must be a JSON object with 'steps'.")
        schema = declared(parameters)
        unknown = used(data) - set(schema.get("properties", {}))
        if unknown:
            raise ToolError(
                f"The plan uses {', '.join(sorted('{{params.' + u + '}}' for u in unknown))}, which parameters "
                "do not declare: add them to parameters."
            )
        try:
            compile_plan(fill(data, sample_values(schema)), self._registry(), max_steps=self.limits.max_steps)
        except PlanValidationError as exc:
            raise ToolError(f"The plan cannot be saved as a skill: {_issues(exc)}") from exc
        embedding = None
        if self.embedder is not None:
            (embedding,) = await embed_texts(self.embedder, [f"{name}: {description}"])
        row = await self.rows.save(
            name, description=description.strip(), plan=data, parameters=schema, embedding=embedding, new=new
        )
        self._know(row)
        return row

    async def _with_embeddings(self, rows: list[SkillRow]) -> list[SkillRow]:
        """``rows`` with a vector each: those saved without one get it now (and keep it)."""
        missing = [r for r in rows if r.embedding is None]
        if not missing or self.embedder is None:
            return rows
        vectors = await embed_texts(self.embedder, [f"{r.name}: {r.description}" for r in missing])
        made = {}
        for row, vector in zip(missing, vectors, strict=True):
            await self.rows.set_embedding(row.name, row.version, vector)
            made[row.name] = dataclasses.replace(row, embedding=vector)
        return [made.get(r.name, r) for r in rows]

    def _registry(self) -> ToolRegistry:
        """The tools a skill's plan may call: ``tools`` and the skills (when ``tools`` does not hold this toolset)."""
        registry = ToolRegistry()
        registry.add_all(self.tools)
        if not any(name in registry for name in self.names):
            registry.add(self)
        return registry

    def _run_limits(self) -> RunLimits:
        """The skill's limits, within the calling step's deadline."""
        call = current_call_or_none()
        remaining = call.remaining() if call is not None else None
        if remaining is None:
            return self.limits
        deadline = remaining if self.limits.deadline is None else min(remaining, self.limits.deadline)
        return dataclasses.replace(self.limits, deadline=max(deadline, 0.001))


def _found(row: SkillRow, score: float | None) -> dict[str, Any]:
    out = {"name": row.name, "version": row.version, "description": row.description, "parameters": row.parameters}
    if score is not None:
        out["score"] = round(score, 4)
    return out


def _problems(schema: Mapping[str, Any], arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
    try:
        return check_for(schema)(arguments, deferred)  # never raises for the arguments
    except InvalidToolSchemaError as exc:  # a skill saved before its parameters were checked when saved
        return [f"the skill's parameters schema cannot be used: {exc.detail}"]


def _issues(exc: PlanValidationError) -> str:
    return "; ".join(i.message for i in exc.issues[:10])


def _failures(result: PlanResult) -> str:
    parts = [f"step {sid!r}: {error.message[:300]}" for sid, error in list(result.errors.items())[:5]]
    return "; ".join(parts) or f"it ended {result.status}"
