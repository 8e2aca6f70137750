"""Between MCP's types and toolplan's: names, annotations, results (pure functions, no I/O).

- Names: an MCP tool's name becomes a toolplan name (1-64 of ``[A-Za-z0-9_-]``), prefixed if asked;
  other characters become ``_``; a name that is still invalid, or taken, is skipped with a reason.
- Schemas: a tool whose input schema is not a valid JSON Schema (``properties`` that is no object,
  a ``pattern`` that is no regular expression, ...) is skipped with the reason, so no foreign
  exception reaches argument validation; a malformed output schema is dropped.
- Annotations: MCP's hints with the spec's defaults (an unannotated tool may destroy data and is not
  idempotent). Hints of an untrusted server are not believed: its tools are neither read-only nor
  idempotent for toolplan, so nothing of theirs is ever repeated on its say-so.
- Results: ``isError`` is a business error; structured content is the output when present, else the
  text (one part: the string; several: a list); images, audio and resources stay typed parts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp.types as mt

from .._errors import InvalidToolSchemaError
from ..plan import META_TOOL_NAMES
from ..tools import ToolAnnotations, ToolDefinition, ToolResult
from ..tools._internal import normalize_schema

__all__ = (
    "IDEMPOTENCY_ARGUMENTS",
    "MCPHints",
    "RemoteTool",
    "convert_result",
    "local_names",
    "mcp_annotations",
    "output_schema",
    "result_text",
    "to_definition",
)

# Arguments toolplan fills with the step's idempotency key when the plan leaves them empty.
IDEMPOTENCY_ARGUMENTS = ("idempotency_key", "idempotencyKey")

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPHints:
    """An MCP tool's behaviour hints with the spec's defaults filled in (what the server claims).

    Attributes:
        read_only: ``readOnlyHint`` (default False).
        destructive: ``destructiveHint`` (default True; False when read-only).
        idempotent: ``idempotentHint`` (default False; True when read-only).
        open_world: ``openWorldHint`` (default True).
    """

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def of(cls, annotations: mt.ToolAnnotations | None) -> MCPHints:
        """The hints of ``annotations`` (None: an unannotated tool), defaults applied."""
        a = annotations or mt.ToolAnnotations()
        read_only = a.read_only_hint is True
        return cls(
            read_only=read_only,
            destructive=False if read_only else a.destructive_hint is not False,
            idempotent=True if read_only else a.idempotent_hint is True,
            open_world=a.open_world_hint is not False,
        )

    def to_dict(self) -> dict[str, bool]:
        """``{"read_only", "destructive", "idempotent", "open_world"}``."""
        return {
            "read_only": self.read_only,
            "destructive": self.destructive,
            "idempotent": self.idempotent,
            "open_world": self.open_world,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteTool:
    """One tool of an MCP server as toolplan sees it."""

    name: str  # toolplan's name
    remote: str  # the server's name
    definition: ToolDefinition
    hints: MCPHints
    fill: tuple[str, ...]  # idempotency arguments of its schema


def local_names(remote: Sequence[str], prefix: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """Toolplan names for the server's tool names: ``({remote: local}, {remote: why skipped})``."""
    taken: dict[str, str] = {}
    names: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in remote:
        base = _BAD_CHARS.sub("_", name)
        local = f"{prefix}_{base}" if prefix else base
        if not _NAME.fullmatch(local):
            skipped[name] = f"its name as a toolplan tool, {local[:80]!r}, is not 1-64 letters, digits, '_' or '-'" + (
                " (use a shorter prefix)" if prefix else ""
            )
        elif local in META_TOOL_NAMES:
            skipped[name] = f"{local!r} is a meta-tool's name (plans cannot call one); give the toolset a prefix"
        elif local in taken:
            skipped[name] = f"it becomes {local!r}, the name of the server's tool {taken[local]!r}"
        elif name in names:
            skipped[name] = "the server lists it twice"
        else:
            taken[local] = name
            names[name] = local
    return names, skipped


def _annotations(hints: MCPHints, *, trusted: bool, timeout: float | None) -> ToolAnnotations:
    if not trusted:  # the spec: never decide on hints from untrusted servers (nothing is repeated on their word)
        return ToolAnnotations(read_only=False, idempotent=False, destructive=True, timeout=timeout)
    return ToolAnnotations(
        read_only=hints.read_only,
        idempotent=hints.idempotent,
        destructive=hints.destructive,
        timeout=timeout,
    )


def _parameters(schema: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The schema a plan is checked against, and the idempotency arguments toolplan fills in.

    An idempotency argument is never required of the plan: toolplan fills it when it is left out.
    """
    out = dict(schema)
    properties = out.get("properties")
    if not isinstance(properties, Mapping):
        return out, ()
    fill = tuple(name for name in IDEMPOTENCY_ARGUMENTS if name in properties)
    required = out.get("required")
    if fill and isinstance(required, list):
        out["required"] = [r for r in required if r not in fill]
    return out, fill


def output_schema(schema: Any, local: str) -> dict[str, Any] | None:
    """A listed tool's output schema normalised like every schema, or None when it is absent or unusable.

    An unusable output schema is dropped and the tool kept: toolplan only shows it, it checks no call.
    """
    if schema is None:
        return None
    try:
        return normalize_schema(schema, tool=local)[0]
    except InvalidToolSchemaError:
        return None


def to_definition(tool: mt.Tool, local: str, *, trusted: bool, timeout: float | None = None) -> RemoteTool:
    """The toolplan view of one listed MCP tool, its schema normalised (`InvalidToolSchemaError` if unusable)."""
    hints = MCPHints.of(tool.annotations)
    schema, _notes = normalize_schema(tool.input_schema, tool=local)  # InvalidToolSchemaError: left out
    parameters, fill = _parameters(schema)
    output = output_schema(tool.output_schema, local)
    definition = ToolDefinition(
        name=local,
        description=tool.description or tool.title or (tool.annotations.title if tool.annotations else None) or "",
        parameters_json_schema=parameters,
        output_json_schema=output,
        annotations=_annotations(hints, trusted=trusted, timeout=timeout),
    )
    return RemoteTool(name=local, remote=tool.name, definition=definition, hints=hints, fill=fill)


def mcp_annotations(annotations: ToolAnnotations) -> mt.ToolAnnotations:
    """The MCP hints of toolplan annotations (for tools served over MCP)."""
    return mt.ToolAnnotations(
        read_only_hint=annotations.read_only,
        destructive_hint=False if annotations.read_only else annotations.destructive,
        idempotent_hint=annotations.idempotent or annotations.read_only,
    )


def _part(block: mt.ContentBlock) -> dict[str, Any]:
    """A content block as a typed part (JSON data)."""
    if isinstance(block, mt.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, mt.ImageContent | mt.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "data": block.data}
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        part: dict[str, Any] = {"type": "resource", "uri": str(res.uri), "mime_type": res.mime_type}
        if isinstance(res, mt.TextResourceContents):
            part["text"] = res.text
        else:
            part["blob"] = res.blob
        return part
    return {
        "type": "resource_link",
        "uri": str(block.uri),
        "name": block.name,
        "mime_type": block.mime_type,
        "description": block.description,
    }


def result_text(result: mt.CallToolResult) -> str:
    """The text parts of a result, joined (an error's message)."""
    return "\n".join(b.text for b in result.content if isinstance(b, mt.TextContent))


def _content(result: mt.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if not blocks:
        return None
    if all(isinstance(b, mt.TextContent) for b in blocks):
        texts = [b.text for b in blocks if isinstance(b, mt.TextContent)]
        return texts[0] if len(texts) == 1 else texts
    return [_part(b) for b in blocks]


def convert_result(result: mt.CallToolResult, tool: str) -> ToolResult:
    """An MCP tool result as a `ToolResult` (``isError``: a business error with the server's text)."""
    if result.is_error:
        message = result_text(result).strip() or f"The MCP tool {tool!r} reported an error without a message."
        return ToolResult.failure(message, content=_content(result))
    return ToolResult(_content(result))
