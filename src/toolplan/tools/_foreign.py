"""Tools of other frameworks as toolplan tools: LangChain tools, OpenAI Agents SDK function tools, pydantic-ai tools.

`foreign_tool` recognises a tool object by its class's module (no optional package is imported to
ask), so ``ToolRegistry([langchain_tool, agents_function_tool, pydantic_ai_tool])`` just works. The
host framework's own machinery runs each call: LangChain's ``ainvoke`` (callbacks, validation),
the Agents SDK's ``on_invoke_tool`` (schema validation, failure formatting) after the tool's input
guardrails, pydantic-ai's function schema validation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import UserError
from ._definition import ToolAnnotations, ToolDefinition
from ._result import ToolResult
from ._schema import check_for

__all__ = ("AgentsFunctionTool", "LangChainTool", "PydanticAITool", "foreign_tool")


def _module_of(obj: Any) -> str:
    for cls in type(obj).__mro__:
        module = cls.__module__ or ""
        if module.startswith(("langchain_core.", "agents.", "pydantic_ai.")):
            return module
    return ""


def foreign_tool(obj: Any, name: str | None = None) -> LangChainTool | AgentsFunctionTool | PydanticAITool | None:
    """A toolplan tool for a LangChain tool, an Agents SDK ``FunctionTool`` or a pydantic-ai ``Tool``; else None."""
    module = _module_of(obj)
    if not module:
        return None
    cls_names = {c.__name__ for c in type(obj).__mro__}
    if module.startswith("langchain_core.") and "BaseTool" in cls_names:
        return LangChainTool(obj, name=name)
    if module.startswith("agents.") and "FunctionTool" in cls_names:
        return AgentsFunctionTool(obj, name=name)
    if module.startswith("pydantic_ai.") and hasattr(obj, "function_schema") and hasattr(obj, "takes_ctx"):
        return PydanticAITool(obj, name=name)
    return None


class _Foreign:
    """One foreign tool function: its definition as the host framework describes it."""

    __slots__ = ("_definition", "tool")

    def __init__(self, tool: Any, name: str, description: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self._definition = ToolDefinition(
            name=name,
            description=description or "",
            parameters_json_schema=dict(schema) or {"type": "object", "properties": {}},
            annotations=ToolAnnotations(),
        )

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._definition.name

    def definitions(self) -> Sequence[ToolDefinition]:
        """The one function this tool offers."""
        return (self._definition,)


class LangChainTool(_Foreign):
    """A LangChain ``BaseTool`` (``@tool``, ``StructuredTool``, ...) called through ``ainvoke``.

    ``config`` (a LangChain ``RunnableConfig``) is passed to every call, so callbacks and traces nest
    under it; without one, LangChain picks up the config of the runnable that is running, if any.
    """

    __slots__ = ("config",)

    def __init__(self, tool: Any, *, name: str | None = None, config: Mapping[str, Any] | None = None) -> None:
        schema = tool.tool_call_schema
        params = schema if isinstance(schema, Mapping) else schema.model_json_schema()
        super().__init__(tool, name or tool.name, tool.description, params)
        self.config = config

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call the tool; a ``ToolException`` it reports (``handle_tool_error``) still comes back as content."""
        config: Any = self.config
        return ToolResult(await self.tool.ainvoke(dict(arguments), config=config))


class AgentsFunctionTool(_Foreign):
    """An OpenAI Agents SDK ``FunctionTool``: input guardrails, then the SDK's own invocation.

    Args:
        tool: The ``FunctionTool``.
        name: Another name for it.
        context: Builds the SDK ``ToolContext`` of one nested call from (tool name, call id, JSON
            arguments); by default a context with no run state.
    """

    __slots__ = ("_calls", "context")

    def __init__(
        self,
        tool: Any,
        *,
        name: str | None = None,
        context: Callable[[str, str, str], Any] | None = None,
    ) -> None:
        super().__init__(tool, name or tool.name, tool.description, tool.params_json_schema)
        self.context = context
        self._calls = 0

    def needs_approval(self) -> bool:
        """True when the tool may need a human's approval (it cannot run inside a plan)."""
        return bool(self.tool.needs_approval)

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Refuses tools that need approval; other arguments are checked by the SDK when called."""
        if self.needs_approval():
            return [f"tool {name!r} needs approval before it runs, which a plan cannot ask for: call it on its own"]
        return check_for(self._definition.parameters_json_schema)(arguments, deferred)

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run the tool's input guardrails, then the tool; a rejection or a failure is a failed call."""
        from agents import tool as agents_tool
        from agents.tool_context import ToolContext
        from agents.tool_guardrails import ToolInputGuardrailData
        from agents.tracing import function_span

        if self.needs_approval():
            return ToolResult.failure(f"Tool {name!r} needs approval and cannot run inside a plan: call it directly.")
        self._calls += 1
        payload = json.dumps(dict(arguments))
        call_id = f"toolplan-{self._calls}"
        ctx = (
            self.context(name, call_id, payload)
            if self.context is not None
            else ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments=payload)
        )
        for guardrail in self.tool.tool_input_guardrails or ():
            agent: Any = ctx.agent
            verdict = await guardrail.run(ToolInputGuardrailData(context=ctx, agent=agent))
            behavior = verdict.behavior
            if behavior["type"] == "reject_content":
                return ToolResult.failure(str(behavior["message"]))
            if behavior["type"] == "raise_exception":
                return ToolResult.failure(f"Guardrail {guardrail.get_name()!r} stopped the call of {name!r}.")
        with function_span(name=name, input=payload) as span:  # nests under the plan call's span
            result = await self._invoke(ctx, payload, agents_tool)
            span.span_data.output = str(result.content if result.ok else result.error)[:2000]
        return result

    async def _invoke(self, ctx: Any, payload: str, agents_tool: Any) -> ToolResult:
        invoke = self.tool.on_invoke_tool
        # The SDK's invoker turns an exception into text the model reads, which would pass for a
        # success here: call what it wraps, and format the error with the tool's failure function.
        raw = getattr(invoke, "_invoke_tool_impl", None)  # private to the SDK (0.24), checked for
        if raw is None:
            return ToolResult(await invoke(ctx, payload))
        try:
            return ToolResult(await raw(ctx, payload))
        except Exception as exc:
            message = await agents_tool.maybe_invoke_function_tool_failure_error_function(
                function_tool=self.tool, context=ctx, error=exc
            )
            if message is None:
                raise
            return ToolResult.failure(f"{message} ({type(exc).__name__}: {exc})"[:2000])


class PydanticAITool(_Foreign):
    """A pydantic-ai ``Tool`` outside an agent run: its function, validated by its own schema.

    Tools that take a ``RunContext`` need a pydantic-ai run: use `toolplan.integrations.pydantic_ai`.
    """

    __slots__ = ()

    def __init__(self, tool: Any, *, name: str | None = None) -> None:
        if tool.takes_ctx:
            raise UserError(
                f"pydantic-ai tool {tool.name!r} takes a RunContext, which only a pydantic-ai run provides: "
                "give the pydantic-ai agent toolplan's ToolPlanning capability instead "
                "(from toolplan.integrations.pydantic_ai import ToolPlanning)."
            )
        super().__init__(tool, name or tool.name, tool.description or "", tool.function_schema.json_schema)

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Validate the arguments with the tool's schema and call its function."""
        schema = self.tool.function_schema
        validated = schema.validator.validate_python(dict(arguments))
        return ToolResult(await schema.call(validated, None))
