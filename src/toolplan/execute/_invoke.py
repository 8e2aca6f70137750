"""The one path every tool call takes: plan steps, fallbacks, code mode and agent calls.

It looks the tool up, charges the budget, holds the tool's concurrency slot, applies the timeout
and turns every way a call can end into a `CallOutcome`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from .. import _context
from .._context import _CURRENT, CallContext, RawCall, linger_hook, raw_call
from .._errors import InvalidArgumentsError, ToolError, ToolOutputError, UnknownToolError, WorkerDiedError
from .._numbers import finite_number
from .._records import fast_init, maker
from ..plan import Budget
from ..plan._internal import _show
from ..tools import Tool, ToolAnnotations, ToolRegistry, ToolResult
from ..tools._internal import SchemaCheck, invalid_message, owned
from ._backend import Backend
from ._budget import BudgetMeter
from ._choice import ToolChooser
from ._limits import RunLimits
from ._result import StepError, cap_text
from ._window import BudgetWindow, WindowCharge

__all__ = ("CallOutcome", "ToolInvoker", "calling_invoker", "ended", "when_done")

_DEFAULT_ANNOTATIONS = ToolAnnotations()


@fast_init
@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one tool call ended."""

    output: Any = None
    error: StepError | None = None
    # A sync tool's thread that goes on after the call was abandoned (timed out): it holds the
    # call's limits until it ends.
    lingering: Future[Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


_new_outcome = maker(CallOutcome)


@fast_init
@dataclass(frozen=True, slots=True)
class _Entry:
    """What a call of one tool needs, looked up once per invoker."""

    owner: Tool
    execute: Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]]
    annotations: ToolAnnotations
    semaphore: asyncio.Semaphore | None
    # Priced by a cost function, or charged to a budget window: the call takes the slower path.
    special: bool = False
    # A tool that does not check its calls itself (MCP, foreign, hand-written): its arguments are
    # checked here, before anything is charged or called, and what it returns is copied.
    check: SchemaCheck | None = None


class ToolInvoker:
    """Calls tools with the shared limits of one run (budget, per-tool concurrency, timeouts).

    An agent run has one invoker; each plan it runs gets a `child` that shares the tools'
    concurrency slots and charges the run's budget as well as the plan's own.
    """

    __slots__ = (
        "_entries",
        "_lingering",
        "backend",
        "chooser",
        "default_timeout",
        "exclusive",
        "meter",
        "registry",
        "tool_limits",
        "window",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        budget: Budget | None = None,
        default_timeout: float | None = None,
        tool_limits: Mapping[str, int] | None = None,
        backend: Backend | None = None,
        chooser: ToolChooser | None = None,
        window: WindowCharge | None = None,
    ) -> None:
        self.registry = registry
        self.window = window  # a budget window beyond this run, and the key charged
        self.chooser = chooser  # picks among alternative tools (None: the general one, else the first)
        self.meter = BudgetMeter(budget or Budget())
        self.default_timeout = default_timeout
        self.tool_limits = dict(tool_limits or {})
        self.backend = backend  # None: the in-process backend, inlined
        self._entries: dict[str, _Entry] = {}
        self._lingering: dict[RawCall, Future[Any]] = {}
        # Made for one plan run only (`prepare`): that run may use it as its own ledger.
        self.exclusive = False

    @classmethod
    def for_limits(
        cls,
        registry: ToolRegistry,
        limits: RunLimits,
        *,
        backend: Backend | None = None,
        chooser: ToolChooser | None = None,
    ) -> ToolInvoker:
        """An invoker that applies ``limits`` (budget, window, step timeout, per-tool concurrency)."""
        return cls(
            registry,
            budget=limits.budget,
            default_timeout=limits.step_timeout,
            tool_limits=limits.tool_concurrency,
            backend=backend,
            chooser=chooser,
            window=limits.window,
        )

    def for_plan(self) -> ToolInvoker:
        """The invoker a plan run charges: this one if it was made for that run alone, else a `child`.

        An invoker shared by several runs (an agent run's) keeps its own ledger; each plan gets a
        child so that the plan's own budget binds that plan only.
        """
        if self.exclusive:
            self.exclusive = False
            return self
        return self.child()

    def with_budget(self, budget: Budget) -> ToolInvoker:
        """This invoker, or a `child` bound by ``budget`` too when it sets a limit."""
        return self if budget.unlimited else self.child(budget)

    def child(self, budget: Budget | None = None) -> ToolInvoker:
        """An invoker for one plan of this run.

        It shares the tools and their slots, and keeps its own ledger (its budget may be set later),
        charged together with this one's.
        """
        child = ToolInvoker.__new__(ToolInvoker)
        child.registry = self.registry
        child.meter = BudgetMeter(budget or Budget(), parent=self.meter)
        child.default_timeout = self.default_timeout
        child.tool_limits = self.tool_limits
        child.backend = self.backend
        child.chooser = self.chooser
        child.window = self.window
        child.exclusive = False
        child._entries = self._entries  # shared: the tools' concurrency slots are the run's
        child._lingering = self._lingering
        return child

    def nest_under(self, caller: ToolInvoker, tools: Sequence[str]) -> None:
        """Run a plan started inside one of ``caller``'s calls (a skill's): its calls charge ``caller`` too.

        Each call is then reserved in this ledger and the caller's (and theirs, up to the top run),
        and in the caller's budget window when this invoker has none of its own. A plan whose steps
        (``tools``, one call each) the caller's ledgers cannot cover is refused whole: every call
        ends ``not_run``, none is made.
        """
        self.meter.parent = caller.meter
        if self.window is None:
            self.window = caller.window
            self._entries.clear()  # made before the window was known: they would skip it
        counts: dict[str, int] = {}
        for tool in tools:
            counts[tool] = counts.get(tool, 0) + 1
        cost = sum(self.annotations(tool).cost * n for tool, n in counts.items())
        self.meter.closed = caller.meter.cover(counts, cost)

    def alternatives(self, tool: str, one_of: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str | None] | None:
        """``(members, general member)`` when ``tool`` is a group (or a step's ``one_of``), else None."""
        if one_of:
            general = next((m for m in one_of if self.annotations(m).general), None)
            return one_of, general
        group = self.registry.group(tool)
        return None if group is None else (group.members, group.general)

    def _entry(self, tool: str) -> _Entry | None:
        entry = self._entries.get(tool)
        if entry is None:
            owner = self.registry.owner(tool)
            if owner is None:
                group = self.registry.group(tool)
                if group is None:
                    return None
                # A group called by name without a choice (outside a plan step): its default member.
                entry = self._entry(group.default)
                if entry is not None:
                    self._entries[tool] = entry = _Entry(
                        entry.owner,
                        _calling(entry.execute, group.default),
                        entry.annotations,
                        entry.semaphore,
                        entry.special,
                        entry.check,
                    )
                return entry
            annotations = self.registry.definition(tool).annotations
            limit = _low(annotations.concurrency, self.tool_limits.get(tool))
            entry = self._entries[tool] = _Entry(
                owner,
                owner.execute,
                annotations,
                asyncio.Semaphore(limit) if limit is not None else None,
                annotations.cost_of is not None or self.window is not None,
                self.registry.dispatch_check(tool),
            )
        return entry

    def annotations(self, tool: str) -> ToolAnnotations:
        """The tool's annotations (defaults for unknown tools)."""
        entry = self._entry(tool)
        return entry.annotations if entry is not None else _DEFAULT_ANNOTATIONS

    def concurrency(self, tool: str) -> int | None:
        """Most calls of ``tool`` at once: the lower of its annotation and the run's per-tool limit."""
        return _low(self.annotations(tool).concurrency, self.tool_limits.get(tool))

    def timeout_for(self, tool: str, step_timeout: float | None = None) -> float | None:
        """The effective timeout: the step's, else the tool's, else the run default."""
        if step_timeout is not None:
            return step_timeout
        annotated = self.annotations(tool).timeout
        return annotated if annotated is not None else self.default_timeout

    def _linger(self, raw: RawCall, future: Future[Any]) -> None:
        self._lingering[raw] = future

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,
        run_id: str = "",
        step_id: str = "",
        attempt: int = 1,
        expires: float | None = None,
        fallback: int = False,
    ) -> CallOutcome:
        """Make one call of ``tool``; never raises for tool failures (only for cancellation).

        The budget is reserved first (and given back if the call never starts); the tool's
        concurrency slot is taken before the timeout starts: waiting for a slot is not counted
        against the call's timeout. ``expires`` is the run's deadline (`time.monotonic`), which the
        tool sees in its call context.
        """
        try:
            entry: _Entry | None = self._entries[tool]
        except KeyError:  # the tool's first call
            entry = self._entry(tool)
        if entry is None:
            return CallOutcome(
                error=StepError(kind="unknown_tool", message=str(UnknownToolError(tool, self.registry.names)))
            )
        if entry.check is not None:  # the arguments as they arrive, references resolved
            problem = entry.check.first_problem(arguments)
            if problem is not None:
                return CallOutcome(error=StepError(kind="invalid_arguments", message=invalid_message(tool, problem)))
        if entry.special:  # a cost function, a budget window: one branch, so that plain calls pay nothing more
            charged = await self._charge(entry, tool, arguments)
            if isinstance(charged, CallOutcome):
                return charged
            cost = charged
        else:
            cost = entry.annotations.cost
            refused = self.meter.spend(tool, cost)
            if refused is not None:
                return CallOutcome(error=StepError(kind="limit", message=refused))
        sem = entry.semaphore
        if sem is not None:
            try:
                await sem.acquire()
            except BaseException:
                self.meter.release(tool, cost)  # cancelled before the call started
                if entry.special and self.window is not None:
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(self.window.window.release(self.window.key, tool, cost))
                raise
        if timeout is not None:
            ends = time.monotonic() + timeout
            expires = ends if expires is None or ends < expires else expires
        # A bound method made per call: one kept on the invoker would be a reference cycle, which
        # only the garbage collector can free (and every plan's records with it).
        raw = raw_call(self._linger, run_id, step_id, tool, attempt, expires, fallback)
        deadline: asyncio.Timeout | None = None
        token = _CURRENT.set(raw)
        try:
            if self.backend is None:
                if timeout is None:
                    result = await entry.execute(tool, arguments)
                else:
                    deadline = asyncio.timeout(timeout)  # made after the slot is taken: it starts now
                    async with deadline:
                        result = await entry.execute(tool, arguments)
            else:
                carrier = _context.trace_carrier
                call = CallContext(
                    run_id=run_id,
                    step_id=step_id,
                    tool=tool,
                    attempt=attempt,
                    deadline=expires,
                    fallback=fallback,
                    trace_context=None if carrier is None else carrier(),
                )
                deadline = asyncio.timeout(timeout)
                async with deadline:
                    result = await self.backend.invoke(entry.owner, tool, arguments, call)
        except (Exception, SystemExit) as exc:
            lingering = self._lingering.pop(raw, None) if self._lingering else None
            self._free(sem, lingering)
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                if lingering is not None:
                    message = (
                        f"Tool {tool!r} timed out after {timeout:g}s; the function is still running in its worker "
                        "thread and its result will be discarded. Retry later, or give the step a longer 'timeout'."
                    )
                else:
                    message = (
                        f"Tool {tool!r} did not finish within {timeout:g}s and was cancelled. "
                        "Retry later, or give the step a longer 'timeout'."
                    )
                return CallOutcome(error=StepError(kind="timeout", message=message), lingering=lingering)
            return _failure(tool, exc)  # a tool's own TimeoutError included
        except BaseException:  # cancelled: a sync tool's thread may go on, holding its slot until it ends
            self._free(sem, self._lingering.pop(raw, None) if self._lingering else None)
            raise
        finally:
            _CURRENT.reset(token)
        if sem is not None:
            sem.release()
        content = result.content if entry.check is None else owned(result.content)  # fixed from now on
        if result.error is not None:
            return CallOutcome(content, StepError(kind="business", message=result.error))
        return _new_outcome(content)  # a maker: cheaper than calling the class

    async def _charge(self, entry: _Entry, tool: str, arguments: Mapping[str, Any]) -> float | CallOutcome:
        """Price a call (its tool's cost function) and reserve it: the run's budget, then the window."""
        cost_of = entry.annotations.cost_of
        if cost_of is None:
            cost = entry.annotations.cost
        else:  # priced from the arguments: a cost function that fails is the call's failure
            priced = _price(cost_of, tool, arguments)
            if isinstance(priced, CallOutcome):
                return priced
            cost = priced
        refused = self.meter.spend(tool, cost)
        if refused is None and self.window is not None:
            window, key = self.window.window, self.window.key
            # Its own task, shielded: a write under way (a store's) ends even if this call is cancelled,
            # and what it reserved is then given back before the cancellation goes on.
            reserving = asyncio.ensure_future(window.reserve(key, tool, cost))
            try:
                refused = await asyncio.shield(reserving)
            except BaseException:
                self.meter.release(tool, cost)
                undo = asyncio.ensure_future(_give_back(reserving, window, key, tool, cost))
                _UNDOING.add(undo)
                undo.add_done_callback(_UNDOING.discard)
                with contextlib.suppress(BaseException):  # cancelled again: the undo still ends on its own
                    await asyncio.shield(undo)
                raise
            if refused is not None:
                self.meter.release(tool, cost)  # the run's budget is not charged for a call the window refused
        if refused is not None:
            return CallOutcome(error=StepError(kind="limit", message=refused))
        return cost

    @staticmethod
    def _free(sem: asyncio.Semaphore | None, lingering: Future[Any] | None) -> None:
        """Give the tool's slot back now, or when the abandoned thread ``lingering`` ends."""
        if sem is None:
            return
        if lingering is None:
            sem.release()
            return
        when_done(lingering, sem.release)


_UNDOING: set[asyncio.Future[None]] = set()  # reservations being given back (a reference, or they may be lost)


async def _give_back(
    reserving: asyncio.Future[str | None], window: BudgetWindow, key: str, tool: str, cost: float
) -> None:
    """Once a reservation abandoned by its call (cancelled) has ended, give back what it reserved."""
    try:
        refused = await reserving
    except BaseException:  # it failed (or was cancelled itself): nothing was reserved
        return
    if refused is None:
        with contextlib.suppress(Exception):  # a store that fails keeps the charge: an overcount, never an overrun
            await window.release(key, tool, cost)


def _price(
    cost_of: Callable[[Mapping[str, Any]], float], tool: str, arguments: Mapping[str, Any]
) -> float | CallOutcome:
    """What a call costs by its tool's cost function, or the failed call (error kind ``cost``) when it fails."""
    try:
        cost = cost_of(arguments)
    except Exception as exc:  # a cost function is user code: any error is the call's, coded
        detail = str(exc) or "(no message)"
        return CallOutcome(
            error=StepError(
                kind="cost",
                message=f"The cost function of tool {tool!r} raised {type(exc).__name__}: {cap_text(detail, 300)}; "
                "the call was not made. Check the arguments it was given, or fix the cost function.",
            )
        )
    if not finite_number(cost) or cost < 0:
        shown = _show(cost)  # bounded, and never raises (an int too long for repr, say)
        return CallOutcome(
            error=StepError(
                kind="cost",
                message=f"The cost function of tool {tool!r} returned {shown}, not a finite number >= 0; "
                "the call was not made. Fix the cost function.",
            )
        )
    return float(cost)


def _calling(
    execute: Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]], name: str
) -> Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]]:
    """``execute`` with the function name fixed to ``name`` (a group's default member)."""

    def call(_tool: str, arguments: Mapping[str, Any]) -> Awaitable[ToolResult]:
        return execute(name, arguments)

    return call


def when_done(future: Future[Any], callback: Callable[[], None]) -> None:
    """Call ``callback`` in the running event loop once ``future`` (a thread's) is done.

    The callback runs in the context of the caller (a copy made now), not in the worker thread's:
    tasks it starts (the steps that waited for the thread's slot) see the run's context
    variables (its dependencies, its trace).
    """
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()

    def done(_f: Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing is waiting any more
            loop.call_soon_threadsafe(callback, context=ctx)

    future.add_done_callback(done)


def calling_invoker() -> ToolInvoker | None:
    """The invoker of the tool call running now (in this process), or None outside one.

    A plan started inside a tool call (a skill's plan) charges that call's run: see
    `ToolInvoker.nest_under`. The call's context holds the invoker's linger hook, a bound method,
    so finding it costs the calls nothing.
    """
    raw = _CURRENT.get()
    if raw is None:
        return None
    owner = getattr(linger_hook(raw), "__self__", None)
    return owner if isinstance(owner, ToolInvoker) else None


async def ended(future: Future[Any]) -> None:
    """Wait until an abandoned thread's call ``future`` is done; what it returned or raised is discarded.

    The attempt it ran was already ended by its own rule (timed out): its late outcome, an error
    included, must never reach the step or the run.
    """
    if future.done():
        return
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    when_done(future, wake)
    await waiter


def _low(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _failure(tool: str, exc: BaseException) -> CallOutcome:
    """How a call that raised ``exc`` ended."""
    if isinstance(exc, InvalidArgumentsError):
        return CallOutcome(error=StepError(kind="invalid_arguments", message=exc.message))
    if isinstance(exc, UnknownToolError):
        return CallOutcome(error=StepError(kind="unknown_tool", message=exc.message))
    if isinstance(exc, ToolError):
        return CallOutcome(error=StepError(kind="business", message=exc.message))
    if isinstance(exc, WorkerDiedError):  # a distributed backend lost the process running the call
        return CallOutcome(
            error=StepError(kind="unknown_outcome" if exc.outcome_unknown else "infrastructure", message=exc.message)
        )
    if isinstance(exc, ToolOutputError):  # returned normally, but output that is not JSON data
        return CallOutcome(error=StepError(kind="infrastructure", message=exc.message))
    if isinstance(exc, SystemExit):
        return CallOutcome(
            error=StepError(
                kind="infrastructure",
                message=f"Tool {tool!r} tried to exit the process (SystemExit({exc.code!r})); toolplan stopped it. "
                "Tools must not call sys.exit (argparse and click do on bad input): raise an exception or return "
                "an error instead.",
            )
        )
    return _infrastructure(tool, exc)


def _infrastructure(tool: str, exc: BaseException) -> CallOutcome:
    detail = str(exc) or "(no message)"
    return CallOutcome(
        error=StepError(kind="infrastructure", message=f"Tool {tool!r} raised {type(exc).__name__}: {detail}")
    )
