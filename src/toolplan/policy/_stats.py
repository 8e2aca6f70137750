"""Decayed statistics per (group, tool), in memory and, through `StatsStore`, in a database.

Every number is an exponentially decayed sum: an observation ``half_life`` seconds old weighs half
as much as a new one, so a tool that got better (or worse) is noticed. The decay is applied when
the numbers are read or added to, from the time they were last updated.

`StatsStore` is the policy's protocol for a shared, durable home of the statistics;
`toolplan.store.Store` implements it (the store sits above this package and imports it), so
learning survives restarts and is shared by every process on one database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ("ArmStats", "Observation", "StatsStore", "decay_factor")


def decay_factor(age: float, half_life: float | None) -> float:
    """The weight left after ``age`` seconds: ``0.5 ** (age / half_life)`` (1 without decay)."""
    if half_life is None or age <= 0.0:
        return 1.0
    return float(0.5 ** (age / half_life))


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """One call of a tool chosen from a group, as the statistics keep it.

    Attributes:
        reward: In [0, 1] (see `RewardWeights`).
        ok: The call succeeded.
        latency: Seconds it took.
        cost: Budget units it cost.
        at: When (the policy's clock, Unix seconds by default).
    """

    reward: float
    ok: bool
    latency: float
    cost: float
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ArmStats:
    """The decayed sums of one tool's observations in one group.

    Attributes:
        n: Observations (decayed).
        reward: Sum of rewards (decayed).
        successes: Successful calls (decayed).
        latency: Sum of latencies in seconds (decayed).
        cost: Sum of costs (decayed).
        updated_at: When they were last updated (the decay counts from there).
    """

    n: float = 0.0
    reward: float = 0.0
    successes: float = 0.0
    latency: float = 0.0
    cost: float = 0.0
    updated_at: float = 0.0

    def at(self, now: float, half_life: float | None) -> ArmStats:
        """These numbers decayed to ``now``."""
        f = decay_factor(now - self.updated_at, half_life)
        if f == 1.0:
            return self
        return ArmStats(
            n=self.n * f,
            reward=self.reward * f,
            successes=self.successes * f,
            latency=self.latency * f,
            cost=self.cost * f,
            updated_at=now,
        )

    def add(self, obs: Observation, half_life: float | None) -> ArmStats:
        """These numbers decayed to ``obs.at``, with ``obs`` added."""
        base = self.at(max(obs.at, self.updated_at), half_life)
        return ArmStats(
            n=base.n + 1.0,
            reward=base.reward + obs.reward,
            successes=base.successes + (1.0 if obs.ok else 0.0),
            latency=base.latency + obs.latency,
            cost=base.cost + obs.cost,
            updated_at=max(obs.at, self.updated_at),
        )

    @property
    def mean_reward(self) -> float:
        """Average reward (0 before any observation)."""
        return self.reward / self.n if self.n > 0 else 0.0

    @property
    def success_rate(self) -> float:
        """Share of successful calls (0 before any observation)."""
        return self.successes / self.n if self.n > 0 else 0.0

    @property
    def mean_latency(self) -> float:
        """Average seconds per call."""
        return self.latency / self.n if self.n > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        """The numbers and their averages, as JSON data."""
        return {
            "n": self.n,
            "mean_reward": self.mean_reward,
            "success_rate": self.success_rate,
            "mean_latency": self.mean_latency,
            "mean_cost": self.cost / self.n if self.n > 0 else 0.0,
            "updated_at": self.updated_at,
        }


@runtime_checkable
class StatsStore(Protocol):
    """Where a `ToolPolicy` keeps its statistics beyond one process (`toolplan.store.Store` is one)."""

    async def load_tool_stats(self, group: str) -> dict[str, ArmStats]:
        """The stored statistics of ``group``'s tools, by tool (as last updated: not decayed to now)."""
        ...

    async def record_tool_stats(self, group: str, tool: str, observation: Observation, half_life: float | None) -> None:
        """Add ``observation`` to ``(group, tool)``'s statistics, atomically (other processes add too)."""
        ...
