"""The rows of saved plans (`toolplan.skills`): one per version of a skill, the newest is the skill."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .._errors import ToolError
from .._json import dumps, loads
from ..store import Store
from ..store import _internal as t

__all__ = ("SkillRow", "SkillStore")


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillRow:
    """One version of a saved plan.

    Attributes:
        name: The skill's name (a plan step calls it as ``skill:NAME``).
        version: 1 for the first, one more for each update.
        description: What it does, for people and models (and for search).
        plan: The plan template (JSON data; its arguments may hold ``{{params.x}}``).
        parameters: The JSON Schema of its parameters.
        embedding: The vector of its name and description, when an embedder made one.
        created_at: When this version was saved (Unix seconds).
    """

    name: str
    version: int
    description: str
    plan: dict[str, Any]
    parameters: dict[str, Any]
    embedding: list[float] | None
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """JSON data, for the model and the CLI (no embedding)."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "parameters": self.parameters,
            "plan": self.plan,
        }


def _row(r: Any) -> SkillRow:
    return SkillRow(
        name=r["name"],
        version=int(r["version"]),
        description=r["description"],
        plan=loads(r["plan"]),
        parameters=loads(r["parameters"]),
        embedding=loads(r["embedding"]) if r["embedding"] else None,
        created_at=float(r["created_at"]),
    )


class SkillStore:
    """Saved plans in a `Store` (their table is part of its schema)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def save(
        self,
        name: str,
        *,
        description: str,
        plan: dict[str, Any],
        parameters: dict[str, Any],
        embedding: list[float] | None,
        new: bool,
    ) -> SkillRow:
        """Save the next version of skill ``name`` (``new``: it must not exist yet; else it must).

        Raises:
            ToolError: ``new`` and the skill exists, or not ``new`` and it does not.
        """
        k = t.skills
        now = time.time()

        def write(engine: sa.Engine) -> int:
            with engine.begin() as conn:
                latest = conn.execute(sa.select(sa.func.max(k.c.version)).where(k.c.name == name)).scalar()
                if new and latest is not None:
                    raise ToolError(f"A skill named {name!r} exists already: change it with skill_update.")
                if not new and latest is None:
                    raise ToolError(f"No skill named {name!r}: make it with skill_create (skill_search lists them).")
                version = int(latest or 0) + 1
                conn.execute(
                    sa.insert(k).values(
                        name=name, version=version, description=description, plan=dumps(plan),
                        parameters=dumps(parameters), embedding=dumps(embedding) if embedding is not None else None,
                        created_at=now,
                    )
                )  # fmt: skip
                return version

        try:
            version = await self.store.db.transact(write)
        except sa.exc.IntegrityError as exc:  # another process saved the same version first
            raise ToolError(f"Skill {name!r} was changed at the same time by someone else: try again.") from exc
        return SkillRow(
            name=name,
            version=version,
            description=description,
            plan=plan,
            parameters=parameters,
            embedding=embedding,
            created_at=now,
        )

    async def get(self, name: str, version: int | None = None) -> SkillRow | None:
        """The newest version of skill ``name`` (or version ``version``), or None."""
        k = t.skills

        def read(engine: sa.Engine) -> Any:
            query = sa.select(k).where(k.c.name == name)
            query = query.where(k.c.version == version) if version is not None else query
            with engine.connect() as conn:
                return conn.execute(query.order_by(k.c.version.desc()).limit(1)).mappings().first()

        row = await self.store.db.read(read)
        return _row(row) if row is not None else None

    async def latest(self, *, limit: int = 1000) -> list[SkillRow]:
        """The newest version of every skill, by name."""
        k = t.skills
        newest = sa.select(k.c.name, sa.func.max(k.c.version).label("v")).group_by(k.c.name).subquery()

        def read(engine: sa.Engine) -> list[SkillRow]:
            query = (
                sa.select(k)
                .join(newest, sa.and_(k.c.name == newest.c.name, k.c.version == newest.c.v))
                .order_by(k.c.name)
                .limit(limit)
            )
            with engine.connect() as conn:
                return [_row(r) for r in conn.execute(query).mappings()]

        return await self.store.db.read(read)  # type: ignore[no-any-return]

    async def set_embedding(self, name: str, version: int, embedding: list[float]) -> None:
        """Keep the vector computed for a version saved without one."""
        k = t.skills

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(
                    sa.update(k).where(k.c.name == name, k.c.version == version).values(embedding=dumps(embedding))
                )

        await self.store.db.transact(write)
