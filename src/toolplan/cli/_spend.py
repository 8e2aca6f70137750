"""Model spend options of the commands that ask a model: caps, and the price table (``--price``, ``--prices``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import UserError
from .._json import JSONTextError, loads
from ..models import ModelPrice, SpendLimits
from ._loader import CliInputError

__all__ = (
    "MaxMoneyOpt",
    "MaxTotalTokensOpt",
    "PriceOpt",
    "PricesFileOpt",
    "parse_prices",
    "spend_limits",
)

_MAX_PRICES_BYTES = 1_048_576

MaxTotalTokensOpt = Annotated[
    int | None, typer.Option("--max-total-tokens", min=0, metavar="N", help="Most model input plus output tokens.")
]
MaxMoneyOpt = Annotated[
    float | None,
    typer.Option("--max-money", min=0, metavar="AMOUNT", help="Most money spent on the model (needs its --price)."),
]
PriceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        metavar="MODEL=IN,OUT[,CACHED]",
        help="A model's price per million tokens: input, output, cached input (repeatable), "
        "e.g. --price gpt-4o-mini=0.15,0.6,0.075.",
    ),
]
PricesFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        metavar="FILE.json",
        help='A price table: {"MODEL": {"input": IN, "output": OUT, "cached_input": CACHED}, ...}.',
    ),
]


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CliInputError(f"{what}: {text!r} is not a number.") from None


def parse_prices(prices: list[str] | None, prices_file: Path | None) -> dict[str, ModelPrice]:
    """The price table of ``--prices FILE`` and each ``--price MODEL=IN,OUT[,CACHED]`` (these win)."""
    table: dict[str, ModelPrice] = {}
    if prices_file is not None:
        try:
            if prices_file.stat().st_size > _MAX_PRICES_BYTES:
                raise CliInputError(f"--prices {prices_file}: the file is over {_MAX_PRICES_BYTES} bytes.")
            data: Any = loads(prices_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, JSONTextError) as exc:
            raise CliInputError(f"--prices {prices_file}: cannot read it as JSON ({exc}).") from None
        if not isinstance(data, dict):
            raise CliInputError(f"--prices {prices_file}: write an object of models, each {{input, output}}.")
        for name, entry in data.items():
            if not isinstance(entry, dict) or set(entry) - {"input", "output", "cached_input", "cache_write"}:
                raise CliInputError(
                    f"--prices {prices_file}: model {name!r} needs an object with input, output and optionally "
                    "cached_input and cache_write (money per million tokens)."
                )
            try:
                table[name] = ModelPrice(**entry)
            except (TypeError, UserError) as exc:
                raise CliInputError(f"--prices {prices_file}: model {name!r}: {exc}") from None
    for spec in prices or ():
        name, sep, numbers = spec.partition("=")
        parts = numbers.split(",")
        if not sep or not name.strip() or len(parts) not in (2, 3):
            raise CliInputError(f"--price {spec!r}: write MODEL=IN,OUT or MODEL=IN,OUT,CACHED (per million tokens).")
        values = [_number(p.strip(), f"--price {spec!r}") for p in parts]
        try:
            table[name.strip()] = ModelPrice(
                input=values[0], output=values[1], cached_input=values[2] if len(values) == 3 else None
            )
        except UserError as exc:
            raise CliInputError(f"--price {spec!r}: {exc}") from None
    return table


def spend_limits(
    *,
    max_total_tokens: int | None = None,
    max_money: float | None = None,
    prices: list[str] | None = None,
    prices_file: Path | None = None,
) -> SpendLimits | None:
    """The `SpendLimits` of the command line; None when no option was given."""
    table = parse_prices(prices, prices_file)
    if not table and max_total_tokens is None and max_money is None:
        return None
    return SpendLimits(
        max_total_tokens=max_total_tokens,
        max_money=max_money,
        prices=table,
    )
