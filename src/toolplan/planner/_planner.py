"""`Planner`: a question and a tool catalogue in, a validated plan out, with at most one repair."""

from __future__ import annotations

import json
import secrets
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .._errors import PlanIssue, PlanValidationError, UserError
from ..models import (
    AssistantMessage,
    ForceTool,
    Model,
    ModelMessage,
    ModelSettings,
    SpendCharge,
    SpendLimits,
    SystemMessage,
    ToolCall,
    ToolReturnMessage,
    Usage,
    UserMessage,
    infer_model,
)
from ..models._internal import SpendMeter
from ..plan import DEFAULT_MAX_STEPS, META_TOOL_NAMES, Dialect, Plan, dump_plan, validate_plan
from ..store import Store
from ..tools import ToolAnnotations, ToolDefinition, ToolRegistry, ToolsLike
from ..tracing._internal import get_tracer
from ._schema import plan_schema
from ._store import PlanVersion, save_request

__all__ = ("SUBMIT_TOOL_NAME", "OutputDialect", "PlanDraft", "Planner", "new_id")

SUBMIT_TOOL_NAME = "submit_plan"
OutputDialect = Literal["native", "chaining"]
"""The dialects a planner delivers its plans in (the model always writes the native one)."""
_B36 = string.digits + string.ascii_lowercase


def new_id(prefix: str) -> str:
    """``{prefix}_{unix ms}_{8 base-36 characters}`` from `secrets`: sortable by time, not guessable."""
    return f"{prefix}_{int(time.time() * 1000)}_{''.join(secrets.choice(_B36) for _ in range(8))}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanDraft:
    """What the planner made of a question.

    Attributes:
        request_id: ``req_...``: this planning request.
        plan_id: ``plan_...``: the final version's id (the repaired one, after a repair).
        parent_id: The first version's id when the plan was repaired, else None.
        plan: The plan (the repaired version after a repair), or None if none could be read.
        issues: What is wrong with it (errors) or worth knowing (warnings); coded like `validate_plan`'s.
        valid: True when the plan has no errors and may be run.
        repaired: True when a repair request was made (whatever came of it).
        usage: Model requests and tokens.
        money: What the model requests cost at ``Planner(spend=...)``'s prices; None without a price.
        requests: The model requests made, in order: the messages of each (1, or 2 with a repair).
        text: The plan as the model wrote it (its last version), for diagnosis.
        versions: Every version, oldest first (the first draft, then its repair), as a store keeps them.
        dialect: The dialect the planner delivers plans in (``Planner(dialect=...)``).
        document: The valid plan as JSON data in ``dialect`` (`toolplan.plan.dump_plan`), else None.
    """

    request_id: str
    plan_id: str
    parent_id: str | None
    plan: Plan | None
    issues: tuple[PlanIssue, ...]
    valid: bool
    repaired: bool
    usage: Usage
    requests: tuple[tuple[ModelMessage, ...], ...] = field(repr=False)
    text: str = field(repr=False, default="")
    versions: tuple[PlanVersion, ...] = field(repr=False, default=())
    dialect: OutputDialect = "native"
    document: Mapping[str, Any] | None = field(repr=False, default=None)
    money: float | None = None

    @property
    def errors(self) -> tuple[PlanIssue, ...]:
        """The issues that make the plan invalid."""
        return tuple(i for i in self.issues if i.severity == "error")

    def as_dialect(self, dialect: Dialect) -> dict[str, Any]:
        """The valid plan as JSON data in ``dialect``: ``"native"``, ``"chaining"`` or ``"batch"``.

        Raises:
            PlanValidationError: the draft is not valid (its issues), or the plan cannot be written
                in ``dialect`` (``not_expressible`` issues, see `toolplan.plan.dump_plan`).
        """
        if not self.valid or self.plan is None:
            raise PlanValidationError(self.issues)
        return dump_plan(self.plan, dialect)


_INSTRUCTIONS = """\
You turn a request into a plan of tool calls. Call `{submit}` once with the plan; do not answer the \
request yourself.
A plan is {{"steps": [...], "output_steps": [...]}}. Each step is {{"id": ..., "tool": ..., "arguments": \
{{...}}}} and calls one of the tools below with its arguments. Steps run in parallel unless one uses \
another's output:
- "$ref:ID" as a whole argument value is step ID's output; "$ref:ID.field.0.name" a field of it \
(numbers index lists).
- "{{{{ID.field}}}}" inside a string inserts it, e.g. "Compare {{{{a.temp}}}} with {{{{b.temp}}}}".
- "depends_on": [IDs] orders steps that use no output of each other.
- {{"$op": OP, "args": [...]}} computes a value from references and literals, e.g. {{"$op": "*", "args": \
["$ref:a.price", 3]}}; "when": a reference or such an expression runs the step only if it is true.
List in "output_steps" the steps whose outputs answer the request. Use only these tools, with their \
argument names:
{catalogue}"""


def _catalogue(registry: ToolRegistry) -> str:
    lines = []
    for d in registry.definitions():
        params = d.parameters_json_schema.get("properties", {})
        names = ", ".join(params) if isinstance(params, dict) else ""
        lines.append(f"- {d.name}({names}): {' '.join(d.description.split())[:300]}")
    return "\n".join(lines)


class Planner:
    """Turns a question into a plan over ``tools``, validated, with exactly one repair round when invalid.

    Args:
        model: A `Model`, or ``"provider:name"``.
        tools: The catalogue: functions, tools or a `ToolRegistry` (they are described to the model,
            never called).
        constrained: Ask for the plan through a forced ``submit_plan`` call whose schema is the plan
            format specialised to the catalogue (`plan_schema`), so a provider that enforces a tool's
            schema while the model writes (llama.cpp's server, with a grammar) can only write known
            tools and argument names. False: the model may answer with JSON text.
        max_steps: Most steps a plan may have.
        settings: Model settings for the planner's requests.
        store: Keep every request and both versions of a repaired plan there (`toolplan.store`):
            ``toolplan.planner.get_request(store, draft.request_id)``, ``store.get_plan(draft.plan_id)``.
        dialect: The dialect of ``draft.document``: ``"native"`` or ``"chaining"``. The model always
            writes a native plan (the format the schema constrains); a valid one is converted, and
            a plan the chaining dialect cannot say counts as invalid (a ``not_expressible`` issue,
            which the repair round shows the model).
        spend: Caps on the model spend of one `plan` call (`toolplan.SpendLimits`), checked before
            each request (the first, and the repair) and after each response; a cap reached raises
            `UsageLimitExceeded` with what was spent. Its prices give ``draft.money``.

    Raises:
        UserError: no tools, an unknown ``dialect``, or a money cap without a price for the model.
    """

    def __init__(
        self,
        model: Model | str,
        tools: ToolsLike,
        *,
        constrained: bool = True,
        max_steps: int = DEFAULT_MAX_STEPS,
        settings: ModelSettings | None = None,
        store: Store | None = None,
        dialect: OutputDialect = "native",
        spend: SpendLimits | None = None,
    ) -> None:
        if dialect not in get_args(OutputDialect):
            raise UserError(f"Planner delivers plans in the 'native' or 'chaining' dialect, not {dialect!r}.")
        self.dialect: OutputDialect = dialect
        self.model = infer_model(model)
        if spend is not None:
            if not isinstance(spend, SpendLimits):
                raise UserError(f"spend must be a toolplan.SpendLimits, got {type(spend).__name__}.")
            spend.check(self.model)
        self.spend = spend
        self.store = store
        self.registry = ToolRegistry.of(tools).without(*META_TOOL_NAMES)
        if not self.registry.names:
            raise UserError("Planner needs at least one tool to plan with: pass tools=[...].")
        self.constrained = constrained
        self.max_steps = max_steps
        self.settings = settings
        self.submit_tool = ToolDefinition(
            name=SUBMIT_TOOL_NAME,
            description="Submit the plan of tool calls for the request.",
            parameters_json_schema=plan_schema(self.registry, max_steps=max_steps),
            annotations=ToolAnnotations(cost=0.0),
        )
        self.instructions = _INSTRUCTIONS.format(submit=SUBMIT_TOOL_NAME, catalogue=_catalogue(self.registry))

    async def plan(self, query: str, *, charge: SpendCharge | None = None) -> PlanDraft:
        """Plan ``query``: one request, and one repair request if the plan is invalid.

        ``charge`` also checks each request against a spend window beyond this call (an API key's,
        as the service does) and adds each response's usage to it.

        Raises:
            UserError: ``query`` is empty or not a string.
            UsageLimitExceeded: a spend cap (``spend``'s, or ``charge``'s window) was reached; its
                ``usage`` and ``money`` say what was spent. Nothing is stored.
            ModelHTTPError, ModelConnectionError: the model could not be asked.
            StoreError: the planner has a store and it failed (the draft is not kept then).
        """
        if not isinstance(query, str) or not query.strip():
            raise UserError("Planner.plan() needs a non-empty question (a string).")
        request_id = new_id("req")
        tracer = get_tracer()
        meter = None if self.spend is None and charge is None else SpendMeter(self.spend, self.model, charge=charge)
        if tracer is None:
            return await self._plan(query, request_id, meter)
        from ..tracing._internal import plan_span, record_draft

        with plan_span(tracer, self.model.name, request_id) as span:
            draft = await self._plan(query, request_id, meter)
            record_draft(
                span, draft.plan_id, draft.valid, draft.repaired, draft.usage.input_tokens, draft.usage.output_tokens
            )
            return draft

    async def _plan(self, query: str, request_id: str, meter: SpendMeter | None) -> PlanDraft:
        messages: list[ModelMessage] = [SystemMessage(content=self.instructions), UserMessage(content=query)]
        requests: list[tuple[ModelMessage, ...]] = []
        usage = Usage()
        reply, usage = await self._ask(messages, requests, usage, meter)
        text, call = _plan_text(reply)
        versions = [self._version(text, None)]
        if not versions[0].valid:  # exactly one repair, with the model's own plan and every problem
            messages.append(reply)
            problems = _problems(versions[0].issues, self.constrained)
            if call is not None:
                messages.append(
                    ToolReturnMessage(tool_call_id=call.id, name=call.name, content=problems, is_error=True)
                )
            else:
                messages.append(UserMessage(content=problems))
            reply, usage = await self._ask(messages, requests, usage, meter)
            text, _ = _plan_text(reply)
            versions.append(self._version(text, versions[0].plan_id))
        final = versions[-1]
        draft = PlanDraft(
            request_id=request_id,
            plan_id=final.plan_id,
            parent_id=final.parent_id,
            plan=final.plan,
            issues=final.issues,
            valid=final.valid,
            repaired=len(versions) > 1,
            usage=usage,
            requests=tuple(requests),
            text=text,
            versions=tuple(versions),
            dialect=self.dialect,
            document=self._document(final.plan) if final.valid else None,
            money=None if meter is None else meter.money_spent,
        )
        if self.store is not None:
            spent: dict[str, Any] = usage.to_dict()
            if draft.money is not None:
                spent["money"] = draft.money
            await save_request(self.store, request_id, query, versions, usage=spent)
        return draft

    def _version(self, text: str, parent_id: str | None) -> PlanVersion:
        plan, issues = self._check(text)
        valid = plan is not None and not any(i.severity == "error" for i in issues)
        if valid and plan is not None and self.dialect != "native":
            try:
                self._document(plan)
            except PlanValidationError as exc:  # valid, but not in the dialect asked for: a coded issue
                issues, valid = (*exc.issues, *issues), False
        return PlanVersion(
            plan_id=new_id("plan"), parent_id=parent_id, plan=plan, text=text, issues=issues, valid=valid
        )

    def _document(self, plan: Plan | None) -> dict[str, Any] | None:
        return None if plan is None else dump_plan(plan, self.dialect)

    async def _ask(
        self,
        messages: list[ModelMessage],
        requests: list[tuple[ModelMessage, ...]],
        usage: Usage,
        meter: SpendMeter | None,
    ) -> tuple[AssistantMessage, Usage]:
        if meter is not None:
            await meter.before(messages)
        requests.append(tuple(messages))
        settings = self.settings
        if self.constrained:
            # Named, not "required": llama.cpp's chatml-function-calling applies the tool's schema as a
            # grammar only to a named tool (and answers "required" with HTTP 500).
            forced = ModelSettings(tool_choice=ForceTool(SUBMIT_TOOL_NAME), parallel_tool_calls=False)
            settings = forced if settings is None else settings.merge(forced)
        tools = [self.submit_tool] if self.constrained else []
        tracer = get_tracer()
        if tracer is None:
            response = await self.model.request(messages, tools, settings)
        else:
            from ..tracing._internal import chat_span, record_response

            with chat_span(tracer, self.model.name) as chat:
                response = await self.model.request(messages, tools, settings)
                record_response(chat, response)
        if meter is not None:
            await meter.after(messages, response.usage)
        return response.message, usage + response.usage

    def _check(self, text: str) -> tuple[Plan | None, tuple[PlanIssue, ...]]:
        if not text.strip():
            return None, (
                PlanIssue(
                    code="no_plan",
                    message="No plan was written: answer with the plan as one JSON object "
                    f"(or call {SUBMIT_TOOL_NAME}).",
                ),
            )
        report = validate_plan(text, self.registry, dialect="native", max_steps=self.max_steps)
        return report.plan, (*report.errors, *report.warnings)


def _plan_text(reply: AssistantMessage) -> tuple[str, ToolCall | None]:
    """The plan's JSON text: the first ``submit_plan`` call's arguments, else a JSON object in the text."""
    for call in reply.tool_calls:
        if call.name == SUBMIT_TOOL_NAME:
            return call.arguments, call
    if reply.tool_calls:  # another tool: its arguments may be the plan anyway (small models do this)
        call = reply.tool_calls[0]
        return call.arguments, call
    return _json_in(reply.content or ""), None


_MAX_STARTS = 64  # braces tried as the start of the plan before the text counts as having none


def _json_in(text: str) -> str:
    """The first JSON object in ``text`` (a model may wrap it in prose or a code fence), or "" if none.

    Model output is hostile: nesting too deep for the parser counts as no JSON, and only the first
    `_MAX_STARTS` braces are tried, so a text of many braces costs linear time, not quadratic.
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(_MAX_STARTS):
        if start < 0:
            break
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return text[start:end]
        start = text.find("{", end)
    return ""


def _problems(issues: Sequence[PlanIssue], constrained: bool) -> str:
    errors = [i for i in issues if i.severity == "error"]
    lines = "\n".join(f"- [{i.code}] {f'step {i.step!r}: ' if i.step else ''}{i.message}" for i in errors)
    again = f"call {SUBMIT_TOOL_NAME} again with the whole plan" if constrained else "write the whole plan again"
    return (
        f"The plan is invalid ({len(errors)} problem{'s' if len(errors) != 1 else ''}); nothing ran. Fix every "
        f"problem and {again}:\n{lines}"
    )
