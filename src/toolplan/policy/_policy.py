"""`ToolPolicy`: explore/exploit over alternative tools, learning from every call it chooses.

It implements `toolplan.execute.ToolChooser`: give it to ``execute_plan(..., policy=...)``,
``stream_plan``, or ``Agent(policy=...)`` (whose direct calls, plans and code all use it).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .._errors import ToolplanError, UserError
from ..execute import Choice, ChoiceOutcome, ChoiceRequest
from ..execute._internal import set_default_policy
from ._stats import ArmStats, Observation, StatsStore
from ._strategies import STRATEGIES, Strategy, pick

__all__ = (
    "DEFAULT_HALF_LIFE",
    "PolicySettings",
    "PreferGeneral",
    "RewardWeights",
    "ToolPolicy",
    "parse_policy",
    "policy_settings",
)

#: Seconds after which an observation counts half (a week): tools change, old numbers fade.
DEFAULT_HALF_LIFE = 7 * 24 * 3600.0
#: When the general tool of a group is preferred: ``"when_tight"`` (the budget left is below
#: ``tight_below``), ``"always"`` or ``"never"``.
PreferGeneral: TypeAlias = Literal["when_tight", "always", "never"]
_PREFER: tuple[PreferGeneral, ...] = ("when_tight", "always", "never")


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardWeights:
    """How a call's outcome becomes a reward in [0, 1].

    A failed call earns 0. A successful one earns
    ``1 - latency * min(1, seconds / latency_scale) - cost * min(1, cost / cost_scale)``, where the
    scales are the run's budget: its deadline (else ``default_latency_scale``) and its ``max_cost``
    (else the cost of the dearest alternative).

    Attributes:
        latency: Weight of the latency penalty (0 to 1).
        cost: Weight of the cost penalty (0 to 1).
        default_latency_scale: Seconds that count as "slow" when the run has no deadline.
    """

    latency: float = 0.2
    cost: float = 0.2
    default_latency_scale: float = 10.0

    def __post_init__(self) -> None:
        if not (self.latency >= 0.0 and self.cost >= 0.0 and self.latency + self.cost <= 1.0):
            raise UserError(
                f"Reward weights must be >= 0 and add up to at most 1, got latency={self.latency}, cost={self.cost}."
            )
        if not self.default_latency_scale > 0:
            raise UserError(f"default_latency_scale must be > 0 seconds, got {self.default_latency_scale}.")

    def reward(self, outcome: ChoiceOutcome) -> float:
        """The reward of one outcome."""
        if not outcome.ok:
            return 0.0
        latency_scale = outcome.latency_scale or self.default_latency_scale
        slow = min(1.0, max(outcome.latency, 0.0) / latency_scale)
        dear = min(1.0, outcome.cost / outcome.cost_scale) if outcome.cost_scale else 0.0
        return max(0.0, 1.0 - self.latency * slow - self.cost * dear)


# Strategy names as written (lower case, without "_", "-" or spaces): toolplan's and the ACP proposal's.
_STRATEGY_WORDS: dict[str, Strategy] = {
    "greedy": "greedy",
    "epsilongreedy": "epsilon_greedy",
    "egreedy": "epsilon_greedy",
    "epsilon": "epsilon_greedy",
    "ucb": "ucb1",
    "ucb1": "ucb1",
    "thompson": "thompson",
    "thompsonsampling": "thompson",
    "softmax": "softmax",
    "boltzmann": "softmax",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """What a policy text says: a strategy, general methods, and the strategies' own numbers.

    Attributes:
        strategy: The strategy named, if one.
        prefer_general_methods: ``"always"`` when ``prefer_general_methods`` is named.
        exploration_rate: ``epsilon_greedy``'s rate (``explorationRate=0.2`` or ``epsilon=0.2``), from 0 to 1.
        temperature: ``softmax``'s temperature (``temperature=0.5``), above 0.
    """

    strategy: Strategy | None = None
    prefer_general_methods: PreferGeneral | None = None
    exploration_rate: float | None = None
    temperature: float | None = None


def _word(text: str) -> str:
    return text.strip().lower().replace("_", "").replace("-", "").replace(" ", "")


def _setting(key: str, value: str) -> tuple[str, float] | None:
    """``explorationRate=0.2`` -> ("exploration_rate", 0.2); None when the key or number is not one."""
    try:
        number = float(value)
    except ValueError:
        return None
    if key in ("explorationrate", "epsilon") and 0.0 <= number <= 1.0:
        return "exploration_rate", number
    if key == "temperature" and 0.0 < number < math.inf:
        return "temperature", number
    return None


def policy_settings(text: str | None) -> PolicySettings:
    """A plan's ``policy`` text: a strategy, ``prefer_general_methods`` and ``name=number`` settings.

    The words are joined by ``,`` or ``+``. Strategy names are toolplan's (``epsilon_greedy``,
    ``ucb1``...) or the ACP proposal's (``Greedy``, ``EpsilonGreedy``, ``UCB``,
    ``ThompsonSampling``), in any case; ``softmax`` takes a ``temperature``, ``epsilon_greedy`` an
    ``explorationRate``. Unknown words are ignored (the
    policy's own settings stand).
    """
    if not text:
        return PolicySettings()
    strategy: Strategy | None = None
    prefer: PreferGeneral | None = None
    numbers: dict[str, float] = {}
    for raw in text.replace("+", ",").split(","):
        key, eq, value = raw.partition("=")
        word = _word(key)
        if eq:
            setting = _setting(word, value.strip())
            if setting is not None:
                numbers[setting[0]] = setting[1]
        elif word in _STRATEGY_WORDS:
            strategy = _STRATEGY_WORDS[word]
        elif word == "prefergeneralmethods":
            prefer = "always"
    return PolicySettings(strategy=strategy, prefer_general_methods=prefer, **numbers)


def parse_policy(text: str | None) -> tuple[Strategy | None, PreferGeneral | None]:
    """A plan's ``policy`` text: its strategy and ``prefer_general_methods`` (`policy_settings` has the rest)."""
    settings = policy_settings(text)
    return settings.strategy, settings.prefer_general_methods


class ToolPolicy:
    """Chooses among alternative tools by explore/exploit, and learns from every call it chose.

    Args:
        strategy: ``"thompson"`` (default), ``"ucb1"``, ``"epsilon_greedy"``, ``"greedy"`` or
            ``"softmax"``. A plan's own ``policy`` (``"ucb1"``, ``"greedy,prefer_general_methods"``,
            ``"EpsilonGreedy, explorationRate=0.3"``) overrides it for that plan's steps.
        seed: Seed of the policy's random numbers: the same seed and the same outcomes give the
            same choices. None draws one.
        epsilon: Exploration rate of ``epsilon_greedy``.
        temperature: Temperature of ``softmax`` (above 0; low: nearly greedy, high: nearly uniform).
        prefer_general_methods: Choose the group's ``general`` tool ``"when_tight"`` (the share of
            the budget left is below ``tight_below``), ``"always"``, or ``"never"``.
        tight_below: The share of the tightest limit (calls, cost, time) below which a budget is tight.
        half_life: Seconds after which an observation weighs half (None: never fades).
        weights: How outcome, latency and cost make a reward.
        store: Where statistics are kept beyond this object (`toolplan.store.Store`): read at each
            choice and added to after each call, so they survive restarts and every process sharing
            the database learns from all. Without one they live in this object.
        clock: Unix seconds now (tests and simulations pass their own).
    """

    def __init__(
        self,
        strategy: Strategy = "thompson",
        *,
        seed: int | None = None,
        epsilon: float = 0.1,
        temperature: float = 0.1,
        prefer_general_methods: PreferGeneral = "when_tight",
        tight_below: float = 0.2,
        half_life: float | None = DEFAULT_HALF_LIFE,
        weights: RewardWeights | None = None,
        store: StatsStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if strategy not in STRATEGIES:
            raise UserError(f"Unknown strategy {strategy!r}. Choose one of: {', '.join(STRATEGIES)}.")
        if not 0.0 <= epsilon <= 1.0:
            raise UserError(f"epsilon must be from 0 to 1, got {epsilon}.")
        if not 0.0 < temperature < math.inf:
            raise UserError(f"temperature must be a number above 0, got {temperature}.")
        if prefer_general_methods not in _PREFER:
            raise UserError(
                f"prefer_general_methods must be one of {', '.join(_PREFER)}, got {prefer_general_methods!r}."
            )
        if not 0.0 <= tight_below <= 1.0:
            raise UserError(f"tight_below must be a share from 0 to 1, got {tight_below}.")
        if half_life is not None and not half_life > 0:
            raise UserError(f"half_life must be > 0 seconds (or None for no decay), got {half_life}.")
        if store is not None and not isinstance(store, StatsStore):
            raise UserError(f"store must keep tool statistics (toolplan.store.Store does), got {type(store).__name__}.")
        self.strategy: Strategy = strategy
        self.seed = seed
        self.rng = random.Random(seed)
        self.epsilon = epsilon
        self.temperature = temperature
        self.prefer_general_methods: PreferGeneral = prefer_general_methods
        self.tight_below = tight_below
        self.half_life = half_life
        self.weights = weights or RewardWeights()
        self.store = store
        self.clock = clock
        self._stats: dict[str, dict[str, ArmStats]] = {}

    def __repr__(self) -> str:
        return f"ToolPolicy({self.strategy!r}, seed={self.seed!r})"

    # -- the ToolChooser protocol ------------------------------------------------------------------

    async def choose(self, request: ChoiceRequest) -> Choice:
        """The member of ``request.group`` to call (see the class docstring for how)."""
        stats, note = await self._load(request.group)
        return self.decide(request, stats, note)

    async def observe(self, choice: Choice, outcome: ChoiceOutcome) -> None:
        """Learn from how the call of ``choice.chosen`` went."""
        obs = Observation(
            reward=self.weights.reward(outcome),
            ok=outcome.ok,
            latency=outcome.latency,
            cost=outcome.cost,
            at=self.clock(),
        )
        arms = self._stats.setdefault(choice.group, {})
        arms[choice.chosen] = arms.get(choice.chosen, ArmStats()).add(obs, self.half_life)
        if self.store is not None:
            with contextlib.suppress(ToolplanError):  # kept in memory; the next choice reads the store again
                await self.store.record_tool_stats(choice.group, choice.chosen, obs, self.half_life)

    # -- the decision, synchronous -----------------------------------------------------------------

    def decide(self, request: ChoiceRequest, stats: dict[str, ArmStats], note: str = "") -> Choice:
        """The choice for ``request`` given the group's statistics (pure but for the seeded random numbers)."""
        candidates = request.candidates
        said = policy_settings(request.strategy)
        strategy = said.strategy or self.strategy
        prefer = said.prefer_general_methods or self.prefer_general_methods
        general = request.general if request.general in candidates else None
        if general is not None and prefer != "never":
            left = request.budget_left
            why = ""
            if prefer == "always":
                why = "the policy prefers general methods"
            elif left is not None and left < self.tight_below:
                why = f"the budget is tight ({left:.0%} of it left)"
            if why:
                return self._choice(request, general, "prefer_general_methods", 1.0, note or why)
        now = self.clock()
        arms = [stats.get(c, ArmStats()).at(now, self.half_life) for c in candidates]
        index, probability = pick(
            strategy,
            [(a.n, a.reward) for a in arms],
            self.rng,
            epsilon=self.epsilon if said.exploration_rate is None else said.exploration_rate,
            temperature=self.temperature if said.temperature is None else said.temperature,
        )
        return self._choice(request, candidates[index], strategy, probability, note)

    @staticmethod
    def _choice(request: ChoiceRequest, chosen: str, strategy: str, probability: float, reason: str) -> Choice:
        return Choice(
            group=request.group,
            chosen=chosen,
            strategy=strategy,
            probability=probability,
            candidates=request.candidates,
            step_id=request.step_id,
            reason=reason,
            general=request.general,
        )

    async def _load(self, group: str) -> tuple[dict[str, ArmStats], str]:
        """The group's statistics: the store's when there is one (shared, fresh), else this object's."""
        if self.store is None:
            return self._stats.get(group, {}), ""
        try:
            stats = await self.store.load_tool_stats(group)
        except ToolplanError as exc:
            return self._stats.get(group, {}), f"statistics store unavailable ({exc.message}); used this process's"
        self._stats[group] = dict(stats)
        return stats, ""

    def stats(self, group: str) -> dict[str, ArmStats]:
        """What this object holds of ``group``'s statistics (as of its last choice or observation), decayed to now."""
        now = self.clock()
        return {tool: s.at(now, self.half_life) for tool, s in self._stats.get(group, {}).items()}

    async def load_stats(self, group: str) -> dict[str, ArmStats]:
        """``group``'s statistics from the store (or this object), decayed to now."""
        stats, _note = await self._load(group)
        now = self.clock()
        return {tool: s.at(now, self.half_life) for tool, s in stats.items()}


def _names_strategy(text: str) -> bool:
    return parse_policy(text)[0] is not None


# Runs given no policy whose plan names a strategy learn with their registry's own `ToolPolicy`.
set_default_policy(ToolPolicy, _names_strategy)
