"""Model spend: prices per model, caps on a run's tokens and money, and the meter that enforces them.

A `SpendMeter` is asked before each model request (`SpendMeter.before`: would this request's known
input pass a cap?) and told after each response (`SpendMeter.after`: the usage the provider reported).
The agent and the planner use one per run; a `SpendCharge` adds a window beyond the run (an API key's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .._errors import UsageLimitExceeded, UserError
from .._numbers import finite_number
from ._messages import ModelMessage, Usage, approximate_tokens, message_text
from ._model import Model

__all__ = ("ModelPrice", "SpendCharge", "SpendLimits", "SpendMeter", "SpendWindow")

_MILLION = 1_000_000


def _price(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not finite_number(value) or value < 0:  # type: ignore[operator]  # finite_number: a number
        raise UserError(f"ModelPrice.{name} must be a finite number >= 0 (money per million tokens), got {value!r}.")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """What a model's tokens cost, in your currency per million tokens.

    Attributes:
        input: Per million input tokens.
        output: Per million output tokens.
        cached_input: Per million input tokens read from the provider's prompt cache; None: ``input``.
        cache_write: Per million input tokens written to the prompt cache (Anthropic); None: ``input``.
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        _price("input", self.input)
        _price("output", self.output)
        _price("cached_input", self.cached_input, optional=True)
        _price("cache_write", self.cache_write, optional=True)

    def cost(self, usage: Usage) -> float:
        """The money ``usage`` costs at these prices."""
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        plain = max(0, usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens)
        return (
            plain * self.input
            + usage.cached_input_tokens * cached
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
        ) / _MILLION

    @property
    def lowest_input(self) -> float:
        """The cheapest an input token can be: the cached rate when it is lower."""
        return self.input if self.cached_input is None else min(self.input, self.cached_input)


def _cap(name: str, value: object, *, money: bool = False) -> None:
    if value is None:
        return
    if money:
        if not finite_number(value) or value < 0:  # type: ignore[operator]
            raise UserError(f"{name} must be a finite number >= 0, or None for no limit; got {value!r}.")
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{name} must be a whole number of tokens >= 0, or None for no limit; got {value!r}.")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendLimits:
    """Caps on what a run may spend on its model, and the prices that turn tokens into money.

    Checked before each model request (a request whose known input would pass a cap is not sent)
    and after each response (with the usage the provider reports). None: no cap.

    Attributes:
        max_input_tokens: Most input (prompt) tokens over the run, cached ones included.
        max_output_tokens: Most output tokens over the run.
        max_total_tokens: Most input plus output tokens over the run.
        max_money: Most money over the run, at ``prices``; needs a price for the run's model.
        prices: `ModelPrice` by model: the model's name (``"gpt-4o-mini"``) or ``"provider:name"``.
            With prices and no caps, runs still report the money they spent.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_money: float | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict[str, ModelPrice])

    def __post_init__(self) -> None:
        for name in ("max_input_tokens", "max_output_tokens", "max_total_tokens"):
            _cap(f"SpendLimits.{name}", getattr(self, name))
        _cap("SpendLimits.max_money", self.max_money, money=True)
        if not isinstance(self.prices, Mapping):
            raise UserError(f"SpendLimits.prices must map model names to ModelPrice, got {type(self.prices).__name__}.")
        for name, price in self.prices.items():
            if not isinstance(name, str) or not isinstance(price, ModelPrice):
                raise UserError(
                    f"SpendLimits.prices maps model names to toolplan.ModelPrice(input=..., output=...); "
                    f"got {name!r}: {type(price).__name__}."
                )

    def price_of(self, model: Model) -> ModelPrice | None:
        """The price of ``model``: by ``"provider:name"``, else by its name; None if the table has none."""
        return self.prices.get(f"{model.provider}:{model.name}") or self.prices.get(model.name)

    def check(self, model: Model, *, money: bool = False) -> ModelPrice | None:
        """The price of ``model``; a `UserError` if a money cap (this one's, or ``money``) needs one and it has none."""
        price = self.price_of(model)
        if price is None and (self.max_money is not None or money):
            known = ", ".join(sorted(self.prices)) or "none"
            raise UserError(
                f"A money cap is set, but the price table has no price for model {model.name!r} "
                f"(provider {model.provider!r}). Add prices={{{model.name!r}: ModelPrice(input=..., output=...)}} "
                f"(money per million tokens). Prices given for: {known}."
            )
        return price


@runtime_checkable
class SpendWindow(Protocol):
    """Model spend per key and window beyond one run (``toolplan.store.StoreWindow`` implements it)."""

    async def spend_refusal(self, key: str, input_tokens: int, money: float) -> str | None:
        """Why a request of ``key`` reading at least ``input_tokens`` (costing at least ``money``) may not be sent."""
        ...

    async def charge_spend(self, key: str, usage: Usage, money: float) -> None:
        """Add what one response of ``key`` used."""
        ...


@dataclass(frozen=True, slots=True)
class SpendCharge:
    """A spend window and the key a run's model requests are charged to (an API key, say)."""

    window: SpendWindow
    key: str
    needs_price: bool = False  # the window caps money: the model must have a price

    def __post_init__(self) -> None:
        if not isinstance(self.window, SpendWindow):
            raise UserError(f"SpendCharge.window must be a SpendWindow, got {type(self.window).__name__}.")
        if not isinstance(self.key, str) or not 0 < len(self.key) <= 256:
            raise UserError(f"SpendCharge.key must be a string of 1 to 256 characters, got {self.key!r}.")


_NO_LIMITS = SpendLimits()


class SpendMeter:
    """What one run spent on ``model``, checked against ``limits`` (and a key's window) around each request.

    Raises `UserError` at once when a money cap is set and ``model`` has no price.
    """

    __slots__ = ("_known", "charge", "limits", "model", "money", "price", "usage")

    def __init__(self, limits: SpendLimits | None, model: Model, *, charge: SpendCharge | None = None) -> None:
        self.limits = _NO_LIMITS if limits is None else limits
        self.model = model
        self.charge = charge
        self.price = self.limits.check(model, money=charge is not None and charge.needs_price)
        self.usage = Usage()
        self.money = 0.0
        self._known: tuple[int, int] | None = None  # (messages sent, input tokens the provider counted for them)

    @property
    def money_spent(self) -> float | None:
        """The money spent so far; None when the model has no price."""
        return None if self.price is None else self.money

    def estimate(self, messages: Sequence[ModelMessage]) -> int:
        """The input tokens a request of ``messages`` reads at least, as far as is known before sending it.

        The messages an earlier request sent count as the provider counted them then; messages since
        count one token per word and per punctuation mark (tool definitions are not counted).
        """
        start, tokens = self._known if self._known is not None and self._known[0] <= len(messages) else (0, 0)
        return tokens + sum(approximate_tokens(message_text(m)) for m in messages[start:])

    async def before(self, messages: Sequence[ModelMessage]) -> None:
        """Raise `UsageLimitExceeded` if a request of ``messages`` would pass a cap; else return."""
        n = self.estimate(messages)
        lim = self.limits
        u = self.usage
        refusal: tuple[str, str] | None = None
        about = f"The next model request would read at least {n} input tokens"
        fix = "or end the conversation sooner (fewer, smaller tool results; tool planning needs fewer requests)"
        if lim.max_input_tokens is not None and u.input_tokens + n > lim.max_input_tokens:
            refusal = (
                "max_input_tokens",
                f"{about}, and the run has read {u.input_tokens} of max_input_tokens={lim.max_input_tokens}. "
                f"Raise max_input_tokens, {fix}.",
            )
        elif lim.max_total_tokens is not None and u.total_tokens + n >= lim.max_total_tokens:
            refusal = (
                "max_total_tokens",
                f"{about} (and write at least one), and the run has used {u.total_tokens} of "
                f"max_total_tokens={lim.max_total_tokens}. Raise max_total_tokens, {fix}.",
            )
        elif lim.max_output_tokens is not None and u.output_tokens >= lim.max_output_tokens:
            refusal = (
                "max_output_tokens",
                f"The run has written {u.output_tokens} of max_output_tokens={lim.max_output_tokens}: no output "
                "is left for another model request. Raise max_output_tokens, or ask for shorter answers.",
            )
        cheapest = 0.0 if self.price is None else n * self.price.lowest_input / _MILLION
        if refusal is None and lim.max_money is not None and self.money + cheapest > lim.max_money:
            refusal = (
                "max_money",
                f"{about}, costing at least {cheapest:.6g}, and the run has spent {self.money:.6g} of "
                f"max_money={lim.max_money:g}. Raise max_money, {fix}.",
            )
        if refusal is None and self.charge is not None:
            refused = await self.charge.window.spend_refusal(self.charge.key, n, cheapest)
            if refused is not None:
                refusal = ("key_spend", refused)
        if refusal is not None:
            raise self.exceeded(*refusal)

    async def after(self, messages: Sequence[ModelMessage], usage: Usage) -> None:
        """Add one response's ``usage`` (the request sent ``messages``); raise `UsageLimitExceeded` past a cap."""
        self.usage = self.usage + usage
        spent = 0.0 if self.price is None else self.price.cost(usage)
        self.money += spent
        if usage.input_tokens > 0:
            self._known = (len(messages), usage.input_tokens)
        if self.charge is not None:
            await self.charge.window.charge_spend(self.charge.key, usage, spent)
        lim = self.limits
        u = self.usage
        how = "Raise it, or end the conversation sooner."
        for limit, used, cap in (
            ("max_input_tokens", u.input_tokens, lim.max_input_tokens),
            ("max_output_tokens", u.output_tokens, lim.max_output_tokens),
            ("max_total_tokens", u.total_tokens, lim.max_total_tokens),
        ):
            if cap is not None and used > cap:
                raise self.exceeded(
                    limit, f"The model's answer took the run to {used} tokens, over {limit}={cap}. {how}"
                )
        if lim.max_money is not None and self.money > lim.max_money + 1e-12:
            raise self.exceeded(
                "max_money",
                f"The model's answer took the run to {self.money:.6g}, over max_money={lim.max_money:g}. {how}",
            )

    def exceeded(self, limit: str, message: str) -> UsageLimitExceeded:
        """A `UsageLimitExceeded` for ``limit`` that carries what was spent."""
        error = UsageLimitExceeded(message, limit=limit)
        error.usage = self.usage
        error.money = self.money_spent
        return error
