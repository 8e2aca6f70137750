"""The attribute and span names toolplan's traces use, in one place.

They follow the OpenTelemetry semantic conventions for generative AI (``gen_ai.*``, status
"Development" as of this writing) where those name a thing toolplan does, and ``toolplan.*`` for
toolplan's own. They are written out here rather than imported from
``opentelemetry-semantic-conventions``: its ``gen_ai`` constants are marked deprecated while the
conventions move, and importing them would warn (an error under ``-W error``).
"""

from __future__ import annotations

from typing import Final

# Operation names (`gen_ai.operation.name`); a span is named "{operation} {subject}".
INVOKE_AGENT: Final = "invoke_agent"
INVOKE_WORKFLOW: Final = "invoke_workflow"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"
PLAN: Final = "plan"  # toolplan's planner: a request (and its repair) that yields a plan

# GenAI attributes.
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"

# The environment variable the GenAI instrumentations read to capture message content.
CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# toolplan's own attributes.
RUN_ID: Final = "toolplan.run.id"
PLAN_REQUEST_ID: Final = "toolplan.plan.request_id"
PLAN_ID: Final = "toolplan.plan.id"
PLAN_VALID: Final = "toolplan.plan.valid"
PLAN_REPAIRED: Final = "toolplan.plan.repaired"
PLAN_STEPS: Final = "toolplan.plan.steps"
STEP_ID: Final = "toolplan.step.id"
ATTEMPT: Final = "toolplan.attempt"
FALLBACK: Final = "toolplan.fallback"
STATUS: Final = "toolplan.status"
ERROR_KIND: Final = "toolplan.error.kind"
ERROR_MESSAGE: Final = "toolplan.error.message"
CRITICAL_PATH: Final = "toolplan.critical_path"
PARALLELISM: Final = "toolplan.parallelism"
BUDGET_CALLS: Final = "toolplan.budget.calls"
BUDGET_COST: Final = "toolplan.budget.cost"

# Events on a plan's span for steps that never called a tool (no span of their own).
STEP_NOT_CALLED: Final = "toolplan.step.not_called"
