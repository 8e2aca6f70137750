"""One-line adapters for the agent frameworks users already run (each behind its extra).

- `toolplan.integrations.pydantic_ai`: the ``ToolPlanning`` capability (``toolplan[pydantic-ai]``).
- `toolplan.integrations.openai_agents`: ``plan_tool(...)`` (``toolplan[openai-agents]``).
- `toolplan.integrations.langchain`: ``make_plan_tool(...)`` (``toolplan[langchain]``).
- `toolplan.integrations.acp`: ``AcpExporter`` and ``acp_updates``, a run as Agent Client Protocol
  ``session/update`` notifications (no extra needed).

The subpackage itself imports no framework; import the module of the one you use.
"""

__all__ = ()
