"""Groups of interchangeable tools: the alternatives a policy chooses between when a step runs.

A group has a name of its own, offered to the model as one tool; a call of the group is a call of
one of its members, chosen at dispatch (`toolplan.policy`). Members share a safety class and are
never destructive: exploring means calling a tool the caller did not name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._errors import UserError
from ._definition import ToolAnnotations, ToolDefinition

__all__ = ("ToolGroup", "alternatives_problem", "group_annotations", "inline_group_name")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolGroup:
    """Interchangeable tools under one name.

    Attributes:
        name: The name steps and the model call.
        members: The tools it may run, in the order given.
        general: The member marked ``general`` (its annotation), if any.
        definition: What the model sees: the general member's (or the first's) parameters, the
            group's description, and annotations that hold for every member.
        hide_members: The members are not offered to the model on their own (they stay callable by name).
    """

    name: str
    members: tuple[str, ...]
    general: str | None
    definition: ToolDefinition
    hide_members: bool = True

    @property
    def default(self) -> str:
        """The member called when nothing chooses: the general one, else the first."""
        return self.general or self.members[0]


def inline_group_name(members: Sequence[str]) -> str:
    """The name of a step's own alternatives (``"tool": {"one_of": [...]}``): the members, sorted, joined by ``|``.

    Steps that list the same tools in any order share it (and so their statistics).
    """
    return "|".join(sorted(members))


def alternatives_problem(members: Sequence[str], definitions: Mapping[str, ToolDefinition]) -> str | None:
    """Why ``members`` cannot be alternatives of one another, or None.

    They must be at least two distinct tools of one safety class, none destructive, and at most one
    of them marked ``general``.
    """
    if len(members) < 2:
        return f"Alternatives need at least two tools, got {len(members)}: name two or more interchangeable tools."
    if len(set(members)) != len(members):
        twice = sorted({m for m in members if members.count(m) > 1})
        return f"Alternatives name {', '.join(map(repr, twice))} more than once: list each tool once."
    classes = {m: definitions[m].annotations.safety_class for m in members}
    destructive = [m for m, c in classes.items() if c == "destructive"]
    if destructive:
        return (
            f"{', '.join(map(repr, destructive))} is destructive, and a policy never chooses a destructive tool "
            "on its own: call it by name in its own step."
        )
    if len(set(classes.values())) > 1:
        shown = ", ".join(f"{m!r} ({c})" for m, c in classes.items())
        return (
            f"Alternatives must share a safety class (read_only with read_only, writes with writes): {shown}. "
            "Group only tools that have the same effect on the world."
        )
    general = [m for m in members if definitions[m].annotations.general]
    if len(general) > 1:
        return (
            f"At most one alternative may be marked general, got {', '.join(map(repr, general))}: "
            "mark the one to prefer when a budget is tight."
        )
    return None


def group_annotations(members: Sequence[ToolAnnotations]) -> ToolAnnotations:
    """Annotations that hold whichever member runs: read_only/idempotent if all are, the highest cost and timeout."""
    timeouts = [a.timeout for a in members]
    return ToolAnnotations(
        read_only=all(a.read_only for a in members),
        idempotent=all(a.idempotent for a in members),
        destructive=any(a.destructive for a in members),
        cost=max(a.cost for a in members),
        timeout=None if any(t is None for t in timeouts) else max(t for t in timeouts if t is not None),
    )


def make_group(
    name: str,
    members: Sequence[str],
    definitions: Mapping[str, ToolDefinition],
    *,
    description: str | None,
    hide_members: bool,
) -> ToolGroup:
    """A `ToolGroup`, or `UserError` saying what is wrong with it."""
    if not isinstance(name, str) or not name:
        raise UserError(f"A tool group needs a name, got {name!r}.")
    if isinstance(members, str):
        raise UserError(f"Tool group {name!r}: pass its members as a list of tool names, not one string.")
    members = tuple(members)
    unknown = [m for m in members if m not in definitions]
    if unknown:
        raise UserError(
            f"Tool group {name!r} names {', '.join(map(repr, unknown))}, which is not registered. "
            "Add the tools first, then the group."
        )
    problem = alternatives_problem(members, definitions)
    if problem is not None:
        raise UserError(f"Tool group {name!r}: {problem}")
    general = next((m for m in members if definitions[m].annotations.general), None)
    model = definitions[general or members[0]]
    names = ", ".join(members)
    definition = ToolDefinition(
        name=name,
        description=description
        if description is not None
        else f"{model.description}\n(One of: {names}; toolplan picks the one that has worked best.)".strip(),
        parameters_json_schema=model.parameters_json_schema,
        output_json_schema=model.output_json_schema,
        annotations=group_annotations([definitions[m].annotations for m in members]),
    )
    return ToolGroup(name=name, members=members, general=general, definition=definition, hide_members=hide_members)
