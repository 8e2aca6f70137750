"""Policies over tool use: explore/exploit among alternative tools, declared plans, and their audit.

- `ToolPolicy` chooses which of a group of interchangeable tools a step calls (``greedy``,
  ``epsilon_greedy``, ``ucb1``, ``thompson``, ``softmax``; seeded), learns from each call's outcome, latency and
  cost, and keeps decayed statistics in memory or in a store (`StatsStore`).
- `parse_declaration` reads a declared plan (``ToolCallPlan``) or a native plan's own goal and
  rationales; `audit` compares it with what ran and returns `Finding` objects; `audit_chain` does
  so for a replanned run (each call against the declaration in force), and `execution_state` says
  where a declaration stands.

See docs/policy.md. (Agent Client Protocol export: `toolplan.integrations.acp`.)
"""

from __future__ import annotations

from .._moved import moved_names as _moved_names
from ._audit import Finding as Finding
from ._audit import FindingKind as FindingKind
from ._audit import audit as audit
from ._chain import audit_chain as audit_chain
from ._chain import chain_traces as chain_traces
from ._chain import execution_state as execution_state
from ._chain import plan_chain as plan_chain
from ._declared import Declaration as Declaration
from ._declared import DeclaredCall as DeclaredCall
from ._declared import DeclaredPolicy as DeclaredPolicy
from ._declared import declaration_of as declaration_of
from ._declared import parse_declaration as parse_declaration
from ._policy import DEFAULT_HALF_LIFE as DEFAULT_HALF_LIFE
from ._policy import PolicySettings as PolicySettings
from ._policy import PreferGeneral as PreferGeneral
from ._policy import RewardWeights as RewardWeights
from ._policy import ToolPolicy as ToolPolicy
from ._policy import parse_policy as parse_policy
from ._policy import policy_settings as policy_settings
from ._state import ExecutionState as ExecutionState
from ._stats import ArmStats as ArmStats
from ._stats import Observation as Observation
from ._stats import StatsStore as StatsStore
from ._strategies import STRATEGIES as STRATEGIES
from ._strategies import Strategy as Strategy
from ._trace import Trace as Trace
from ._trace import TracedCall as TracedCall
from ._trace import trace_of as trace_of

__all__ = (
    "DEFAULT_HALF_LIFE",
    "STRATEGIES",
    "ArmStats",
    "Declaration",
    "DeclaredCall",
    "DeclaredPolicy",
    "ExecutionState",
    "Finding",
    "FindingKind",
    "Observation",
    "PolicySettings",
    "PreferGeneral",
    "RewardWeights",
    "StatsStore",
    "Strategy",
    "ToolPolicy",
    "Trace",
    "TracedCall",
    "audit",
    "audit_chain",
    "chain_traces",
    "declaration_of",
    "execution_state",
    "parse_declaration",
    "parse_policy",
    "plan_chain",
    "policy_settings",
    "trace_of",
)

# Deprecated aliases, kept for one release: the ACP export moved to toolplan.integrations.acp.
# Resolved at call time, by name: the policy layer does not import the integrations above it.
__getattr__ = _moved_names(__name__, dict.fromkeys(("AcpExporter", "acp_updates"), "toolplan.integrations.acp"))
