"""``toolplan demo``: the built-in plan (`_demo`), then one agent task three ways (`_agent_demo`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .._errors import ToolplanError
from ._common import fail, model_option, out, running_model
from ._spend import MaxMoneyOpt, MaxTotalTokensOpt, PriceOpt, PricesFileOpt, spend_limits

__all__ = ("demo_command",)


def demo_command(
    model: Annotated[
        str | None,
        model_option(
            "Run the agent part with a real model, e.g. openai:gpt-4o-mini or local:smollm2 "
            "(default: the built-in demo model).",
        ),
    ] = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    max_money: MaxMoneyOpt = None,
    price: PriceOpt = None,
    prices: PricesFileOpt = None,
) -> None:
    """Run a built-in plan, then one agent task three ways: one call per turn, parallel calls, one plan.

    --max-total-tokens and --max-money cap each agent run's model spend (a run at a cap shows status usage_limit).
    """
    from ._agent_demo import real_demo_model, run_agent_demo  # the agent and its models: only for the demo
    from ._demo import run_demo  # its tools build their schemas at import (~20 ms): only for the demo

    try:
        spend = spend_limits(max_total_tokens=max_total_tokens, max_money=max_money, prices=price, prices_file=prices)
    except ToolplanError as exc:
        fail(exc.message)
    real = None
    if model is not None:  # checked before anything runs: provider, extra, API key
        try:
            real = real_demo_model(model)
        except ToolplanError as exc:
            fail(exc.message)
    code = run_demo(out)
    with running_model(real, model):  # a local model's server runs for the agent part only
        try:
            run_agent_demo(out, real, spend)
        except ToolplanError as exc:
            fail(f"The agent demo failed: {exc.message}")
    raise typer.Exit(code)
