"""The ``search_tools`` meta-tool: the model finds deferred tools and gets their full definitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ToolError
from .._json import dumps
from ..execute import PlanResult
from ..tools import ToolAnnotations, ToolDefinition, ToolRegistry, ToolSearch
from ..tools._internal import note_loaded
from ._metatools import MetaCall, MetaToolBase

__all__ = ("SEARCH_TOOL_NAME", "SearchTool", "search_instructions")

SEARCH_TOOL_NAME = "search_tools"


def search_instructions() -> str:
    """The system-prompt section that tells a model how to find deferred tools."""
    return (
        "## Finding tools\n"
        f"More tools exist than are listed. Call `{SEARCH_TOOL_NAME}` with a few words about what you need "
        "(search once per kind of tool); it returns the best matching tools with their parameters, and you "
        "can then call them directly or name them in a plan. A tool you already know by name can be called "
        "without searching."
    )


def definition_json(definition: ToolDefinition) -> dict[str, Any]:
    """A definition as the model reads it in a search result: name, description, parameters."""
    return {
        "name": definition.name,
        "description": definition.description,
        "parameters": dict(definition.parameters_json_schema),
    }


class SearchTool(MetaToolBase):
    """``search_tools``: ranks the registry's deferred tools and returns the best definitions.

    Every tool it returns is loaded for the rest of the agent run: its definition is added at the
    end of the tool list of the next model requests.

    Args:
        tools: The registry whose deferred tools are searched.
        search: How (default: words alone, five results).
    """

    _name = SEARCH_TOOL_NAME

    def __init__(self, tools: ToolRegistry, search: ToolSearch | None = None) -> None:
        self.registry = tools
        self.search = search or ToolSearch()

    def definitions(self) -> Sequence[ToolDefinition]:
        """The one function the model sees (with the short index, when the search has one)."""
        index = self.search.index_text(self.registry.deferred_names)
        description = (
            f"Find tools by what they do: returns up to {self.search.max_results} matching tools with their "
            "full definitions (name, description, JSON Schema of the parameters). Use a few words about the "
            "task; search again with other words when nothing fits."
        )
        return (
            ToolDefinition(
                name=SEARCH_TOOL_NAME,
                description=f"{description} {index}".strip(),
                parameters_json_schema={
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What the tool should do, in a few words."},
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": self.search.max_results,
                            "description": "How many tools to return at most.",
                        },
                    },
                    "required": ["query"],
                },
                annotations=ToolAnnotations(read_only=True, idempotent=True, cost=0.0),
            ),
        )

    async def find(self, arguments: Mapping[str, Any]) -> list[ToolDefinition]:
        """The definitions ``arguments`` (``query``, optional ``limit``) find; each is loaded for the run.

        Raises:
            ToolError: the arguments are not a query and a limit in range.
        """
        query = arguments.get("query")
        limit = arguments.get("limit")
        unknown = sorted(set(arguments) - {"query", "limit"})
        if unknown:
            raise ToolError(f"search_tools takes 'query' and 'limit', not {', '.join(map(repr, unknown))}.")
        found = await self.search.search(self.registry.deferred_definitions(), query, limit)  # type: ignore[arg-type]
        for definition in found:
            note_loaded(definition.name)
        return found

    async def run(self, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """(text for the model, is_error) of one search."""
        try:
            found = await self.find(arguments)
        except ToolError as exc:
            return exc.message, True
        if not found:
            return "No tool matches. Search again with other words (what the tool does, not how).", False
        return dumps({"tools": [definition_json(d) for d in found]}), False

    async def answer(self, arguments: Mapping[str, Any], ctx: MetaCall) -> tuple[str, bool, PlanResult | None]:
        """Search; in an agent run, the tools found are loaded for the run (called on its own, nothing is)."""
        text, is_error = await self.run(arguments)
        return text, is_error, None
