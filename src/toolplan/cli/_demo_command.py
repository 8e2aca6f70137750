"""``toolplan demo``: the built-in plan (`_demo`), then one agent task three ways (`_agent_demo`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .._errors import ToolplanError
from ._common import fail, out, running_model
from ._demo import run_demo

__all__ = ("demo_command",)


def demo_command(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            metavar="PROVIDER:NAME",
            help="Run the agent part with a real model, e.g. openai:gpt-4o-mini or local:smollm2 "
            "(default: the built-in demo model).",
        ),
    ] = None,
) -> None:
    """Run a built-in plan, then one agent task three ways: one call per turn, parallel calls, one plan."""
    from ._agent_demo import real_demo_model, run_agent_demo  # the agent and its models: only for the demo

    real = None
    if model is not None:  # checked before anything runs: provider, extra, API key
        try:
            real = real_demo_model(model)
        except ToolplanError as exc:
            fail(exc.message)
    code = run_demo(out)
    with running_model(real, model):  # a local model's server runs for the agent part only
        try:
            run_agent_demo(out, real)
        except ToolplanError as exc:
            fail(f"The agent demo failed: {exc.message}")
    raise typer.Exit(code)
