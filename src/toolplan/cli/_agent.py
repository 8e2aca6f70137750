"""``toolplan agent TASK``: run an agent on a task with the tools of a Python file, and show its tool calls.

The executors are the Python API's: ``plan`` (the model may send one ``execute_tool_plan``),
``code`` (``execute_code`` in a sandbox), ``native`` (`NativeExecutor`: a turn's calls at once) and
``sequential`` (`SequentialExecutor`: one at a time). The default model is toolplan's built-in test
model, so the command works with no API key and no network.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._errors import ToolplanError, UserError
from ._common import EXIT_FAILED, EXIT_OK, JsonOpt, ToolsOpt, err, fail, needed_tools, out, parse_model, running_model
from ._loader import CliInputError, load_model_file, split_tools_spec
from ._render import print_json, prose, say
from ._table import DETAIL_LIMIT, StepRow, short, steps_table

if TYPE_CHECKING:
    from ..agent import Agent, AgentResult
    from ..execute import PlanResult, StepResult
    from ..models import Model

__all__ = ("agent_command",)

TEST_MODEL = "test"  # --model test: `toolplan.testing.TestModel`, the default


class ExecutorChoice(enum.StrEnum):
    """How the agent calls tools (``--executor``)."""

    plan = "plan"
    code = "code"
    native = "native"
    sequential = "sequential"


def agent_command(
    task: Annotated[str, typer.Argument(metavar="TASK", help="What to ask the agent, e.g. 'Is Tokyo warmer?'.")],
    tools: ToolsOpt = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            metavar="MODEL",
            help="PROVIDER:NAME (openai:gpt-4o-mini, anthropic:..., ollama:..., local:smollm2), FILE.py:NAME (a "
            "toolplan Model in a Python file, or a function that returns one: a FunctionModel to test with), or "
            "'test' (the default: toolplan's built-in test model, not an LLM: it calls each tool once with "
            "arguments made from its schema, then answers with their results; no key, no network).",
        ),
    ] = TEST_MODEL,
    executor: Annotated[
        ExecutorChoice,
        typer.Option(
            "--executor",
            help="plan: the model may send a plan of many calls (execute_tool_plan); code: it may run Python that "
            "calls the tools (execute_code, in a sandbox); native: a turn's tool calls run at once "
            "(NativeExecutor); sequential: one at a time, in order (SequentialExecutor).",
        ),
    ] = ExecutorChoice.plan,
    max_tool_calls_per_turn: Annotated[
        int | None,
        typer.Option(
            "--max-tool-calls-per-turn",
            min=1,
            metavar="N",
            help="Calls beyond N in one model turn are not run (the model is told). Default 50.",
        ),
    ] = None,
    max_concurrent_tools: Annotated[
        int | None,
        typer.Option(
            "--max-concurrent-tools", min=1, metavar="N", help="Tool calls (or plan steps) running at once. Default 20."
        ),
    ] = None,
    resilience: Annotated[
        bool,
        typer.Option(
            "--resilience/--no-resilience",
            help="Retry the model's rate limits and transient failures with backoff (the default), or try each "
            "model request once.",
        ),
    ] = True,
    max_iterations: Annotated[
        int, typer.Option("--max-iterations", min=1, metavar="N", help="Most model requests in the run.")
    ] = 25,
    instructions: Annotated[
        str,
        typer.Option("--instructions", metavar="TEXT", help="The system prompt."),
    ] = "Answer the user's question using the tools.",
    as_json: JsonOpt = False,
) -> None:
    """Run an agent on TASK with the tools of a Python file; print its answer and a table of its tool calls.

    Exit code 0 when the agent answered, 1 when the run ended without an answer (a limit, a model
    error), 2 when an option or input is invalid.
    """
    if executor is ExecutorChoice.sequential and max_concurrent_tools is not None:
        fail("--max-concurrent-tools does not go with --executor sequential, which runs one tool call at a time.")
    registry = needed_tools(tools, "agent")
    model_obj, built_in = _model(model)
    if not resilience:
        _no_retries(model_obj)
    options: dict[str, Any] = {"max_iterations": max_iterations, "instructions": instructions}
    agent = _agent(model_obj, registry, executor, max_tool_calls_per_turn, max_concurrent_tools, options)
    if built_in and not as_json:
        prose(
            err,
            "Model: toolplan's built-in test model (not an LLM: it calls each tool once with arguments made from "
            "its schema, then answers with their results). Pass --model PROVIDER:NAME for a real model.",
            "yellow",
        )
    with running_model(model_obj, model):
        try:
            result = asyncio.run(_run(agent, task, executor, max_tool_calls_per_turn, max_concurrent_tools))
        except ToolplanError as exc:
            say(err, f"Error: the agent run failed: {' '.join(exc.message.split())}", "red")
            raise typer.Exit(EXIT_FAILED) from None
    _show(result, executor, as_json=as_json)
    raise typer.Exit(EXIT_OK if result.status == "completed" else EXIT_FAILED)


def _model(spec: str) -> tuple[Model, bool]:
    """The model ``--model`` names, and whether it is the built-in test model."""
    from ..models import Model

    if spec.strip().lower() == TEST_MODEL:
        from ..testing import TestModel

        return TestModel(), True
    path, name = split_tools_spec(spec)
    if path.endswith(".py"):
        if name is None:
            fail(f"--model {spec!r}: name the model in the file, as --model FILE.py:NAME.")
        try:
            found = load_model_file(path, name)
        except CliInputError as exc:
            fail(f"--model {spec!r}: {exc.message}")
        if not isinstance(found, Model) and callable(found):
            try:
                found = found()
            except Exception as exc:  # user code: one line, never a traceback
                fail(f"--model {spec!r}: calling {name}() failed: {type(exc).__name__}: {exc}")
        if not isinstance(found, Model):
            fail(
                f"--model {spec!r}: {name} is a {type(found).__name__}, not a toolplan Model (FunctionModel, "
                "ScriptedModel, OpenAIModel, ...) nor a function that returns one."
            )
        return found, False
    model = parse_model(spec)
    assert model is not None
    return model, False


def _no_retries(model: Model) -> None:
    """``--no-resilience``: one try per model request (models without retries are left as they are)."""
    from ..models import RetryConfig

    if isinstance(getattr(model, "retry", None), RetryConfig):
        model.retry = RetryConfig(attempts=1, deadline=None)  # type: ignore[attr-defined]


def _agent(
    model: Model,
    registry: Any,
    executor: ExecutorChoice,
    per_turn: int | None,
    concurrent: int | None,
    options: dict[str, Any],
) -> Agent[None, str]:
    from ..agent import Agent

    options = {**options, "on_limit": "return"}  # a run at a limit is shown, with the calls it made
    if executor in (ExecutorChoice.plan, ExecutorChoice.code):  # the wrappers below set these for the others
        if per_turn is not None:
            options["max_tool_calls_per_turn"] = per_turn
        if concurrent is not None:
            options["max_concurrent_tools"] = concurrent
    if executor is ExecutorChoice.plan:
        options["tool_planning"] = True
    elif executor is ExecutorChoice.code:
        from ..sandbox import SubprocessRunner

        options["code_execution"] = SubprocessRunner()
    try:
        return Agent(model, tools=registry, **options)
    except UserError as exc:
        fail(exc.message)


async def _run(
    agent: Agent[None, str], task: str, executor: ExecutorChoice, per_turn: int | None, concurrent: int | None
) -> AgentResult[str]:
    from ..agent import NativeExecutor, SequentialExecutor

    try:
        if executor is ExecutorChoice.native:
            return await NativeExecutor(agent, max_tool_calls_per_turn=per_turn, max_concurrent_tools=concurrent).run(
                task
            )
        if executor is ExecutorChoice.sequential:
            return await SequentialExecutor(agent, max_tool_calls_per_turn=per_turn).run(task)
        return await agent.run(task)
    finally:
        await agent.model.aclose()


def _calls(result: AgentResult[str], executor: ExecutorChoice) -> list[tuple[str, StepResult]]:
    """Each tool call the run made, in the order they started, with a label: call N, or plan N / code N and the step."""
    via = "code" if executor is ExecutorChoice.code else "plan"
    labelled: list[tuple[str, StepResult]] = []
    n = 0
    for plan in sorted(result.call_results, key=_start):
        for step in sorted(plan.steps.values(), key=lambda r: r.started_at or 0.0):
            n += 1
            labelled.append((f"call {n}", step))
    for k, plan in enumerate(sorted(result.plan_results, key=_start), start=1):
        labelled += [(f"{via} {k}: {sid}", step) for sid, step in plan.steps.items()]
    return labelled


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _start(plan: PlanResult) -> float:
    return plan.started_at or 0.0


def _show(result: AgentResult[str], executor: ExecutorChoice, *, as_json: bool) -> None:
    calls = _calls(result, executor)
    if as_json:
        print_json(
            out,
            {
                "status": result.status,
                "output": result.output,
                "model": result.model_name,
                "executor": executor.value,
                "usage": {
                    "requests": result.usage.requests,
                    "input_tokens": result.usage.input_tokens,
                    "output_tokens": result.usage.output_tokens,
                },
                "tool_calls": [{"call": label, **step.to_dict()} for label, step in calls],
                "error": result.error,
            },
        )
        return
    if calls:
        rows = [
            StepRow(
                label,
                r.tool,
                r.status,
                r.attempts,
                r.duration,
                short(r.output if r.ok else (r.error.message if r.error else r.status), DETAIL_LIMIT),
                "" if r.ok else "red",
                "cached" if r.cached and r.ok else "",
            )
            for label, r in calls
        ]
        table = steps_table(rows, width=out.width if out.is_terminal else None)
        if out.is_terminal:
            out.print(table)
        else:
            for line in out.render_lines(table, out.options.update_width(table.width or out.width)):
                out.out("".join(segment.text for segment in line).rstrip(), highlight=False)
    else:
        say(out, "No tool calls.", "dim")
    usage = result.usage
    say(
        err,
        f"{_count(len(calls), 'tool call')}, {_count(usage.requests, 'model request')} "
        f"({usage.input_tokens} tokens in, {usage.output_tokens} out); status {result.status}.",
        "dim",
    )
    if result.status != "completed":
        say(err, f"The run ended without an answer ({result.status}): {result.error or 'see the calls above'}.", "red")
    say(out, "Answer:", "bold")
    out.print(str(result.output), highlight=False, markup=False, soft_wrap=True)
