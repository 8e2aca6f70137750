"""What a durable run needs from a store, and the rule that decides how a stored run goes on.

`execute/` owns this protocol and `toolplan.store` implements it (the store sits above `execute/`
and imports its records; `execute/` never imports the store). A run without a store has no journal
and pays nothing for this module.

The order a durable run keeps: a step's ``running`` row commits before its tool is called
(`Journal.started`); its result, its event and the budget counters commit in one transaction
(`Journal.finished`) before any dependent is scheduled. Steps that end without a call (skipped,
not run, cancelled) are written in order behind them (`Journal.ended`): a crash before they commit
loses nothing, because resuming derives them again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from .._context import call_key
from .._errors import UserError
from ._approval import ApprovalRequest
from ._result import PlanResult, StepError, StepResult

if TYPE_CHECKING:
    from ..plan import Plan
    from ..tools import ToolAnnotations
    from ._budget import BudgetMeter
    from ._limits import RunLimits

__all__ = (
    "Decision",
    "Journal",
    "RunStore",
    "StoredRun",
    "StoredStep",
    "calls_made",
    "check_run_id",
    "decide",
    "decide_resume",
    "take_up",
    "unknown_outcome",
)

#: How a resumed run treats one stored step:
#: ``reuse``: its record stands (it ended; its tool is not called again);
#: ``run``: it never started (or was refused before its call): run it as usual;
#: ``rerun``: its call was in flight when its process stopped, and calling again is safe (or asked for);
#: ``unknown``: its call was in flight and may have had its effect: it ends ``unknown_outcome``.
#: With ``rerun_unknown``, steps in flight and steps that ended ``unknown_outcome`` are rerun.
Decision = Literal["reuse", "run", "rerun", "unknown"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def check_run_id(run_id: object) -> str:
    """``run_id`` if it is a valid run id.

    Raises:
        UserError: it is not 1-128 letters, digits, ``_``, ``.`` or ``-`` starting with a letter or digit.
    """
    if isinstance(run_id, str) and _RUN_ID.match(run_id):
        return run_id
    shown = repr(run_id)[:80]
    raise UserError(
        f"run_id {shown} is not valid: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or "
        "digit (or leave it out for a new id)."
    )


# Stored statuses of a step whose call may have been in flight when its process stopped.
_IN_FLIGHT = frozenset({"running", "cancelled"})
# Stored statuses of a step that never called its tool: it runs (or is skipped again) as if new.
_NOT_STARTED = frozenset({"pending", "not_run", "skipped", "pending_approval"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredStep:
    """A step as the store last committed it.

    Attributes:
        id: The step id.
        status: A `StepStatus`, or ``unknown_outcome``.
        attempt: Calls started so far (the attempt of the call in flight, for a ``running`` step).
        call_tool: The tool of the last call started (the fallback's, when ``fallback``).
        fallback: The last call started was the step's fallback: the link of its fallback chain (0: none).
        result: The step's record, for a step that ended.
    """

    id: str
    status: str
    attempt: int = 0
    call_tool: str = ""
    fallback: int = False
    result: StepResult | None = None


def decide(step: StoredStep | None, safe: bool, rerun_unknown: bool) -> Decision:
    """The decision for one stored step (None: no row, so it never started).

    ``safe`` says whether the tool of its last call is ``read_only`` or ``idempotent``.
    """
    if step is None or step.status in _NOT_STARTED:
        return "run"
    if step.status in _IN_FLIGHT:
        return "rerun" if safe or rerun_unknown else "unknown"
    if step.status == "unknown_outcome" and rerun_unknown:  # the caller checked: call it again
        return "rerun"
    return "reuse"


def decide_resume(
    steps: Mapping[str, StoredStep], safe: Callable[[str], bool], *, rerun_unknown: bool = False
) -> dict[str, Decision]:
    """`decide` for every stored step; ``safe(tool)`` tells whether a tool may be called again."""
    return {sid: decide(step, safe(step.call_tool), rerun_unknown) for sid, step in steps.items()}


def calls_made(steps: Mapping[str, StoredStep], plan: Plan) -> list[tuple[str, int]]:
    """The tool calls the stored steps began, as ``(tool, count)`` pairs: what a resumed run's budget has spent.

    A step's ``attempt`` counts the calls it began (its row commits before each); when its last
    call was its fallback, that call was of the fallback's tool. A call that began is counted even
    if its process died during it: it happened, as far as anyone can tell.
    """
    by_id = {s.id: s for s in plan.steps}
    made: list[tuple[str, int]] = []
    for sid, row in steps.items():
        if row.attempt <= 0:
            continue
        step = by_id.get(sid)
        tool = step.tool if step is not None else row.call_tool
        if row.call_tool and not row.fallback:  # the tool it called (a step with alternatives: the one chosen)
            tool = row.call_tool
        if row.fallback and step is not None and step.fallback is not None:
            chain = step.fallback.chain  # links 1 to k of it were called, one call each
            k = min(int(row.fallback), len(chain))
            for n, link in enumerate(chain[:k], 1):
                made.append((row.call_tool or link.tool if n == k else link.tool, 1))  # a group's: the member chosen
            if row.attempt > k:
                made.append((tool, row.attempt - k))
        else:
            made.append((tool, row.attempt))
    return made


def take_up(
    stored: StoredRun,
    plan: Plan | None,
    meter: BudgetMeter,
    annotations: Callable[[str], ToolAnnotations],
    rerun_unknown: bool,
) -> dict[str, tuple[Decision, StoredStep]]:
    """Take up a stored run: charge ``meter`` with what its steps spent; what each stored step's row means now.

    What was spent is worked out from the step rows (`calls_made`), which commit before each
    call, so it is exact whenever the process stopped; per-tool counts included.
    """
    if plan is not None:
        for tool, count in calls_made(stored.steps, plan):
            meter.calls += count
            meter.cost += count * annotations(tool).cost
            meter.calls_by_tool[tool] = meter.calls_by_tool.get(tool, 0) + count

    def safe(tool: str) -> bool:
        a = annotations(tool)
        return a.read_only or a.idempotent

    return {sid: (decide(s, safe(s.call_tool), rerun_unknown), s) for sid, s in stored.steps.items()}


def unknown_outcome(run_id: str, step: StoredStep) -> StepError:
    """What a step whose call was in flight, and may not be repeated, says to the model and the user."""
    key = call_key(run_id, step.id, step.fallback)
    return StepError(
        kind="unknown_outcome",
        message=(
            f"Step {step.id!r} was calling {step.call_tool!r} (attempt {step.attempt}) when the process running it "
            f"stopped, so whether that call had its effect is unknown. {step.call_tool!r} is not marked read_only or "
            f"idempotent, so toolplan did not call it again. Check the outside system for idempotency key {key!r}; "
            "to call it again, resume with rerun_unknown=True (CLI: --rerun-unknown)."
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """What the store holds of a run when a process takes it up.

    Attributes:
        run_id: The run's id.
        status: ``running`` (unfinished), ``succeeded``, ``failed`` or ``cancelled``.
        steps: The stored steps by id (steps with no row never started).
        calls: Tool calls charged to the run's budget, as last written with its lease (for display: a
            resumed run works out what was spent from the step rows, `calls_made`).
        cost: Cost charged, likewise.
        result: The stored result of a run that finished.
        approval: The request of a run that waited for approval and was queued again since (answered,
            or its deadline passed), for the steps that still wait or are not ready yet: a resume
            keeps their deadlines and the answers given ahead of time.
    """

    run_id: str
    status: str
    steps: Mapping[str, StoredStep]
    calls: int = 0
    cost: float = 0.0
    result: PlanResult | None = None
    approval: ApprovalRequest | None = None

    @property
    def finished(self) -> bool:
        """True when the run ended succeeded or failed (a cancelled run may be resumed)."""
        return self.result is not None and self.status in ("succeeded", "failed")

    @property
    def unknown(self) -> bool:
        """True when a step ended ``unknown_outcome`` (``rerun_unknown`` reopens even a finished run)."""
        return any(s.status == "unknown_outcome" for s in self.steps.values())


class Journal(Protocol):
    """The store's side of one durable run (one process holds it under a lease)."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    def started(self, step_id: str, tool: str, attempt: int, fallback: int, at: float) -> asyncio.Future[None]:
        """Commit that ``step_id`` is about to call ``tool`` (``fallback``: the link of its fallback chain, or 0).

        Raises (when awaited):
            StoreError: the write did not commit (the run must not call the tool).
        """
        ...

    def finished(self, result: StepResult, calls: int, cost: float) -> asyncio.Future[None]:
        """Commit the step's result, its event and the run's budget counters in one transaction.

        The write goes before any write made after it (a dependent's `started`); the future is done
        once it has committed (with `StoreError` if it could not).
        """
        ...

    def ended(self, result: StepResult) -> None:
        """Write a step that ended without a call of its own (skipped, not run, cancelled), in order."""
        ...

    def event(self, kind: str, step_id: str | None, payload: Mapping[str, object]) -> asyncio.Future[None]:
        """Append an event (its number is the next in the run's gap-free sequence); done once committed."""
        ...

    def plan_complete(self, plan: Plan) -> None:
        """A streamed run's plan has arrived whole and is valid: store it (the run can be resumed from now on)."""
        ...

    async def close(self, result: PlanResult | None, calls: int, cost: float) -> None:
        """The run ended (result) or stopped unfinished (None): commit, then let go of the lease."""
        ...


class RunStore(Protocol):
    """A store that can hold durable runs (``execute_plan(..., store=...)``)."""

    async def begin(
        self,
        run_id: str | None,
        plan: Plan | None,
        limits: RunLimits,
        *,
        parent: str | None = None,
        reopen: bool = False,
    ) -> tuple[Journal, StoredRun | None]:
        """Claim run ``run_id`` (a new id when None) for this process.

        Returns the journal to write through and, for a run that was stored before, what it holds.
        A finished run is not claimed (its journal writes nothing) unless ``reopen`` is True.
        ``plan`` is None for a streamed plan, still arriving: `Journal.plan_complete` stores it.

        Raises:
            RunConflictError: the id holds another plan, or another live process runs it.
            StoreError: the database cannot be used.
        """
        ...
