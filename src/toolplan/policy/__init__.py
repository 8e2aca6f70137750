"""Policies over tool use: explore/exploit among alternative tools, declared plans, and their audit.

- `ToolPolicy` chooses which of a group of interchangeable tools a step calls (``greedy``,
  ``epsilon_greedy``, ``ucb1``, ``thompson``; seeded), learns from each call's outcome, latency and
  cost, and keeps decayed statistics in memory or in a store (`StatsStore`).
- `parse_declaration` reads a declared plan (``ToolCallPlan``) or a native plan's own goal and
  rationales; `audit` compares it with what ran and returns `Finding` objects.
- `acp_updates` turns a run into Agent Client Protocol ``session/update`` notifications.

See docs/policy.md.
"""

from ._policy import DEFAULT_HALF_LIFE as DEFAULT_HALF_LIFE
from ._policy import PreferGeneral as PreferGeneral
from ._policy import RewardWeights as RewardWeights
from ._policy import ToolPolicy as ToolPolicy
from ._policy import parse_policy as parse_policy
from ._stats import ArmStats as ArmStats
from ._stats import Observation as Observation
from ._stats import StatsStore as StatsStore
from ._strategies import STRATEGIES as STRATEGIES
from ._strategies import Strategy as Strategy

__all__ = (
    "DEFAULT_HALF_LIFE",
    "STRATEGIES",
    "ArmStats",
    "Observation",
    "PreferGeneral",
    "RewardWeights",
    "StatsStore",
    "Strategy",
    "ToolPolicy",
    "parse_policy",
)
