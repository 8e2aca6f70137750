"""The scheduler core: pure, synchronous bookkeeping of which step may start, and what a failure skips.

No I/O and no asyncio here, so the rules can be property-tested. The executor asks `take_ready`
for steps to start and reports each outcome with `finish`.

Two kinds of edge: a dependency (the step starts once it succeeded, and is skipped if it did not) and
an ordering edge (``after``: the step starts once the other has ended, whatever its outcome). A
tool's ``resource`` adds ordering edges: the steps on one resource form one chain, in plan order.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ._ordering import plan_order

if TYPE_CHECKING:
    from ..plan import CompiledStep

__all__ = ("EndHandler", "Scheduler", "StepState")

StepState = Literal["pending", "running", "succeeded", "failed", "skipped", "not_run", "cancelled"]
#: Told of every step that ends without an outcome of its own: (step id, state, reason).
EndHandler = Callable[[str, StepState, str], None]
_NONE: dict[Any, Any] = {}  # the empty dict of every scheduler without ordering edges (never written to)


class Scheduler:
    """Eager dataflow: a step is ready the moment its own dependencies have succeeded.

    Steps are numbered in the order they are added (plan order) and kept in parallel lists, not one
    object per step: a plan of 10,000 steps then adds no objects for the garbage collector to count
    and walk (docs/benchmarks.md, "Garbage collection at 10,000 steps").

    Args:
        max_concurrency: Steps running at once, plan-wide.
        tool_limits: Steps of one tool running at once (per-tool ``concurrency``).
        fail_fast: After the first failure, start nothing more (`stop` is called by `finish`).
        on_end: Called at once for each step that ends skipped, not run or cancelled, with the reason.
        resources: The resource of each tool that has one (its ``resource`` annotation): the steps
            of the tools on one resource run one at a time, in plan order, whatever their outcomes.
    """

    __slots__ = (
        "_awaited",
        "_awaited_after",
        "_chained",
        "_dependents",
        "_followers",
        "_ids",
        "_last",
        "_open",
        "_queued",
        "_queues",
        "_ready",
        "_states",
        "_tools",
        "_waiting",
        "fail_fast",
        "failed",
        "max_concurrency",
        "on_end",
        "order",
        "reasons",
        "resources",
        "running",
        "running_by_tool",
        "stopped",
        "tool_limits",
        "unmet",
    )

    def __init__(
        self,
        *,
        max_concurrency: int = 20,
        tool_limits: Mapping[str, int] | None = None,
        fail_fast: bool = False,
        on_end: EndHandler | None = None,
        resources: Mapping[str, str] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.max_concurrency = max_concurrency
        self.tool_limits = dict(tool_limits or {})
        self.fail_fast = fail_fast
        self.on_end = on_end
        self.failed: str | None = None  # the first step that failed (for a fail_fast that arrives late)
        self.order: dict[str, int] = {}  # step id -> its number (plan order)
        self.reasons: dict[str, str] = {}  # why a step was skipped / not run
        self.running = 0
        self.running_by_tool: dict[str, int] = {}  # for tools with a limit
        self.stopped: str | None = None
        self.unmet: set[str] | None = None  # skipped on purpose: a false condition, and their dependents
        # Per step number:
        self._ids: list[str] = []
        self._tools: list[str] = []
        self._states: list[StepState] = []
        self._waiting: list[int] = []  # dependencies not yet succeeded
        self._queued: list[bool] = []  # in a ready queue
        self._dependents: list[int | list[int] | None] = []  # one dependent, several, or none
        self._queues: dict[str, deque[int]] = {}  # ready steps waiting for capacity, per tool
        self._ready = 0  # steps in those queues (one number to look at, not every queue)
        self._awaited: dict[str, list[int]] = {}  # steps waiting on an id not added yet (streamed plans)
        self._open = 0  # steps not yet in a terminal state
        # Ordering edges (plans with `after`, tools with a resource). Without them these stay the
        # one shared empty dict (no dicts to make per run); `_ordering_on` gives them their own.
        self.resources: dict[str, str] = dict(resources) if resources else _NONE  # tool -> resource
        self._followers: dict[int, list[int]] = _NONE  # step -> the steps that run after it ends
        self._awaited_after: dict[str, list[int]] = _NONE  # as _awaited, for ordering edges
        self._chained: dict[int, int] = _NONE  # step -> the step before it on its resource
        self._last: dict[str, int] = _NONE  # resource -> its last step so far

    # -- building -------------------------------------------------------------------------------

    def add(self, step_id: str, tool: str, deps: Sequence[str], after: Sequence[str] = ()) -> None:
        """Add a step. Dependencies and ``after`` steps may name steps added later (streamed plans)."""
        order = self.order
        if step_id in order:
            raise ValueError(f"duplicate step {step_id!r}")
        i = len(self._ids)
        self._waiting.append(0)
        failed_dep = self._wire(i, deps) if deps else -1
        self._ids.append(step_id)
        self._tools.append(tool)
        self._states.append("pending")
        self._queued.append(False)
        awaited = self._awaited.pop(step_id, None) if self._awaited else None
        self._dependents.append(awaited)
        order[step_id] = i
        self._open += 1
        if after or self._awaited_after or self.resources:
            self._order_added(i, step_id, tool, after, awaited is not None)
        if failed_dep >= 0:
            self._skip_from(i, failed_dep)
        elif self.stopped is not None:
            self._end(i, "not_run", self.stopped)
        elif self._waiting[i] == 0 and not self._queued[i]:  # (queued already if its resource's chain was laid again)
            self._enqueue(i)

    def add_all(self, steps: Mapping[str, CompiledStep], after: Mapping[str, Sequence[str]] = _NONE) -> None:
        """Add a plan's steps, in its order: what `add` does for each, in one loop.

        Into a scheduler that has steps already (or has stopped), each is added by `add` itself.
        ``after``: the ``after`` steps of each step that has some (a compiled plan's ``after``).
        """
        if self._ids or self.stopped is not None:
            for step_id, cs in steps.items():
                self.add(step_id, cs.step.tool, cs.deps, after.get(step_id, ()) if after else ())
            return
        if after or self.resources:
            self._add_all_ordered(steps, after)
            return
        self._fresh(steps)
        tools = self._tools
        for i, cs in enumerate(steps.values()):
            tools.append(cs.step.tool)
            if not cs.deps:
                self._enqueue(i)
            else:
                self._wire(i, cs.deps)

    def _fresh(self, steps: Mapping[str, CompiledStep]) -> list[str]:
        """The per-step state of a whole plan added at once (every step pending, none queued); its step ids."""
        n = len(steps)
        self._ids = ids = list(steps)
        self.order = dict(zip(ids, range(n), strict=True))
        self._states = ["pending"] * n
        self._queued = [False] * n
        self._waiting = [0] * n
        self._dependents = [None] * n
        self._open = n
        return ids

    def _wire(self, i: int, deps: Sequence[str]) -> int:
        """Make step ``i`` a dependent of each of ``deps`` and count those not succeeded yet.

        A dependency not added yet (a streamed plan's) is awaited, and counts. Returns one that
        failed, or -1.
        """
        order, states, dependents = self.order, self._states, self._dependents
        waiting = 0
        failed_dep = -1
        for d in deps:
            try:
                j = order[d]
            except KeyError:  # not added yet: awaited
                waiting += 1
                awaited = self._awaited.get(d)
                if awaited is None:
                    self._awaited[d] = [i]
                else:
                    awaited.append(i)
                continue
            others = dependents[j]
            if others is None:
                dependents[j] = i
            elif isinstance(others, int):
                dependents[j] = [others, i]
            else:
                others.append(i)
            state = states[j]
            if state == "pending" or state == "running":
                waiting += 1
            elif state != "succeeded":
                failed_dep = j
        self._waiting[i] = waiting
        return failed_dep

    # -- running --------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True when every added step is in a terminal state."""
        return self._open == 0

    def state(self, step_id: str) -> StepState:
        """The step's current state."""
        return self._states[self.order[step_id]]

    @property
    def has_ready(self) -> bool:
        """True when a step is waiting for capacity and some is free (tool limits aside)."""
        return self._ready > 0 and self.running < self.max_concurrency and self.stopped is None

    def take_ready(self, limit: int | None = None) -> list[str]:
        """Steps to start now (at most ``limit``), in plan order among tools, within the concurrency limits.

        They are marked running; the caller must `finish` each of them.
        """
        out: list[str] = []
        room = self.max_concurrency - self.running
        if limit is not None and limit < room:
            room = limit
        if room <= 0 or self.stopped is not None:
            return out
        queues, ids, states, queued = self._queues, self._ids, self._states, self._queued
        if len(queues) == 1 and not self.tool_limits:  # one tool, no per-tool limit: take in order
            for queue in queues.values():
                while queue and room > 0:
                    i = queue.popleft()
                    self._ready -= 1
                    queued[i] = False
                    states[i] = "running"
                    out.append(ids[i])
                    room -= 1
            self.running += len(out)
            return out
        while room > 0:
            best = -1
            best_tool = ""
            for tool, queue in queues.items():
                if not queue:
                    continue
                limit = self.tool_limits.get(tool)
                if limit is not None and self.running_by_tool.get(tool, 0) >= limit:
                    continue
                head = queue[0]
                if best < 0 or head < best:
                    best, best_tool = head, tool
            if best < 0:
                break
            queues[best_tool].popleft()
            self._ready -= 1
            queued[best] = False
            states[best] = "running"
            self.running += 1
            room -= 1
            if self.tool_limits:
                self._count(best_tool, 1)
            out.append(ids[best])
        return out

    def take_one(self) -> str | None:
        """`take_ready` of one step, without the list: the next step to start (marked running), or None."""
        if not self._ready or self.running >= self.max_concurrency or self.stopped is not None:
            return None
        queues = self._queues
        if len(queues) == 1 and not self.tool_limits:  # one tool, no per-tool limit: the first in order
            for queue in queues.values():
                if not queue:
                    return None
                i = queue.popleft()
                self._ready -= 1
                self._queued[i] = False
                self._states[i] = "running"
                self.running += 1
                return self._ids[i]
        ready = self.take_ready(1)
        return ready[0] if ready else None

    def finish(self, step_id: str, *, succeeded: bool) -> None:
        """Record a running step's outcome: release dependents, or skip them on failure."""
        i = self.order[step_id]
        states = self._states
        if states[i] != "running":
            raise ValueError(f"step {step_id!r} is {states[i]}, not running")
        self.running -= 1
        if self.tool_limits:
            self._count(self._tools[i], -1)
        if not succeeded:
            self._end(i, "failed", None)
            if self.failed is None:
                self.failed = step_id
            self._skip_dependents(i)
            if self.fail_fast:
                self.stop(_fail_fast_reason(step_id))
            return
        states[i] = "succeeded"  # what _end does, inlined for the common case
        self._open -= 1
        if self._followers:
            self._release(i)
        others = self._dependents[i]  # what _children does, inlined too
        if others is None:
            return
        waiting = self._waiting
        for child in (others,) if isinstance(others, int) else others:
            if states[child] == "pending":
                left = waiting[child] - 1
                waiting[child] = left
                if left == 0:
                    self._enqueue(child)

    def set_fail_fast(self) -> list[str]:
        """Switch to fail_fast (a streamed plan's mode arrives late); returns the running steps if it stops now."""
        self.fail_fast = True
        if self.failed is not None and self.stopped is None:
            return self.stop(_fail_fast_reason(self.failed))
        return []

    def hold(self, tool: str, delta: int) -> None:
        """Count (+1) or stop counting (-1) work that holds a slot without a step.

        That is a timed-out sync tool's thread that is still running: it counts against
        ``max_concurrency`` and the tool's limit.
        """
        self.running += delta
        self._count(tool, delta)

    def cancel(self, step_id: str, reason: str) -> None:
        """Record that a running step was cancelled (its dependents are skipped)."""
        i = self.order[step_id]
        if self._states[i] != "running":
            return
        self.running -= 1
        self._count(self._tools[i], -1)
        self._end(i, "cancelled", reason)
        self._skip_dependents(i)

    def stop(self, reason: str) -> list[str]:
        """Start nothing more: every pending step ends ``not_run``. Returns the running steps."""
        if self.stopped is None:
            self.stopped = reason
        for queue in self._queues.values():
            for i in queue:
                self._queued[i] = False
            queue.clear()
        self._ready = 0
        states = self._states
        for i in range(len(states)):
            if states[i] == "pending":
                self._end(i, "not_run", reason)
        return [self._ids[i] for i, state in enumerate(states) if state == "running"]

    def refuse(self, step_id: str, reason: str, *, unmet: bool = False) -> None:
        """A running step could not start after all (budget): it ends ``not_run``, dependents skip.

        ``unmet``: its condition was false; it ends ``skipped``, in `unmet` with its dependents.
        """
        i = self.order[step_id]
        self.running -= 1
        self._count(self._tools[i], -1)
        if unmet:
            self.unmet = (self.unmet or set()) | {step_id}
        self._end(i, "skipped" if unmet else "not_run", reason)
        self._skip_dependents(i)

    # -- internals ------------------------------------------------------------------------------

    def _count(self, tool: str, delta: int) -> None:
        """Keep the running count of a tool with a limit (tools without one need none)."""
        if tool in self.tool_limits:
            self.running_by_tool[tool] = self.running_by_tool.get(tool, 0) + delta

    def _enqueue(self, i: int) -> None:
        self._queued[i] = True
        tool = self._tools[i]
        try:
            queue = self._queues[tool]
        except KeyError:  # the tool's first ready step
            queue = self._queues[tool] = deque()
        queue.append(i)
        self._ready += 1

    def _end(self, i: int, state: StepState, reason: str | None) -> None:
        if self._queued[i]:
            self._queues[self._tools[i]].remove(i)
            self._ready -= 1
            self._queued[i] = False
        self._states[i] = state
        self._open -= 1
        if self._followers:
            self._release(i)
        if reason is not None:
            self.reasons[self._ids[i]] = reason
        if state != "succeeded" and state != "failed" and self.on_end is not None:
            self.on_end(self._ids[i], state, reason or state)

    def _children(self, i: int) -> Sequence[int]:
        others = self._dependents[i]
        if others is None:
            return ()
        return (others,) if isinstance(others, int) else others

    def _skip_dependents(self, i: int) -> None:
        for child in self._children(i):
            if self._states[child] == "pending":
                self._skip_from(child, i)

    def _skip_from(self, i: int, cause: int) -> None:
        """Skip step ``i`` and its pending transitive dependents because step ``cause`` did not succeed."""
        states, unmet = self._states, self.unmet
        stack = [(i, cause)]
        while stack:
            n, why = stack.pop()
            if states[n] != "pending":
                continue
            verb = {"failed": "failed", "cancelled": "was cancelled", "not_run": "did not run"}.get(
                states[why], "was skipped"
            )
            if unmet is not None and self._ids[why] in unmet:  # skipped on purpose, so this one too
                unmet.add(self._ids[n])
                verb = "was skipped (a condition was false)"
            self._end(n, "skipped", f"Skipped because dependency {self._ids[why]!r} {verb}.")
            stack.extend((child, n) for child in self._children(n))

    # -- ordering edges -------------------------------------------------------------------------

    def _add_all_ordered(self, steps: Mapping[str, CompiledStep], after: Mapping[str, Sequence[str]]) -> None:
        """`add_all` for a plan with ordering edges: wire every edge first, then queue what is ready.

        A resource's steps are chained in a topological order of the plan (its own order where the
        plan's edges allow), so a chain never closes a cycle.
        """
        self._ordering_on()
        ids = self._fresh(steps)
        n, order = len(ids), self.order
        self._tools = [cs.step.tool for cs in steps.values()]
        for i, cs in enumerate(steps.values()):
            if cs.deps:
                self._wire(i, cs.deps)
        for sid, ids_after in after.items():
            i = order[sid]
            for a in ids_after:
                self._follow(i, order[a])
        if self.resources:
            resources, tools = self.resources, self._tools
            for i in plan_order(ids, steps, order, after):
                resource = resources.get(tools[i])
                if resource is not None:
                    self._chain(i, resource)
        waiting = self._waiting
        for i in range(n):
            if waiting[i] == 0:
                self._enqueue(i)

    def set_resource(self, tool: str, resource: str) -> None:
        """The steps of ``tool`` work on ``resource`` (its ``resource`` annotation): set before they are added."""
        if self.resources is _NONE:
            self.resources = {}
        self.resources[tool] = resource

    def _ordering_on(self) -> None:
        """Dicts of its own for the ordering edges (the first time they are needed)."""
        if self._followers is _NONE:
            self._followers, self._awaited_after, self._chained, self._last = {}, {}, {}, {}

    def _order_added(self, i: int, step_id: str, tool: str, after: Sequence[str], awaited: bool) -> None:
        """A step `add` adds: its ``after`` steps, the steps that run after it, its resource's chain."""
        self._ordering_on()
        if self._awaited_after:
            followers = self._awaited_after.pop(step_id, None)
            if followers is not None:
                self._followers[i] = followers
                awaited = True
        order = self.order
        for a in after:
            j = order.get(a)
            if j is None:  # not added yet: awaited
                self._waiting[i] += 1
                self._awaited_after.setdefault(a, []).append(i)
            else:
                self._follow(i, j)
        resource = self.resources.get(tool) if self.resources else None
        if resource is not None:
            self._chain(i, resource)
        if awaited and self._last:  # steps added earlier wait for this one: a chain may close a cycle
            self._rechain()

    def _follow(self, i: int, j: int) -> None:
        """Step ``i`` starts only after step ``j`` has ended (if it has not yet)."""
        state = self._states[j]
        if state != "pending" and state != "running":
            return
        followers = self._followers.get(j)
        if followers is None:
            self._followers[j] = [i]
        else:
            followers.append(i)
        self._waiting[i] += 1

    def _chain(self, i: int, resource: str) -> None:
        """Put step ``i`` last on ``resource``: it starts after the step before it there has ended."""
        p = self._last.get(resource)
        self._last[resource] = i
        states, chained = self._states, self._chained
        # A step before it that ended without running may still have one before it that runs.
        while p is not None and states[p] != "pending" and states[p] != "running":
            p = chained.get(p)
        if p is not None:
            chained[i] = p
            self._follow(i, p)

    def _release(self, i: int) -> None:
        """Step ``i`` has ended: the steps that run after it wait for it no more.

        The next step on its resource waits instead for the one before it, if that has not ended
        (step ``i`` was skipped while it ran): one at a time on a resource, whatever ends how.
        """
        followers = self._followers.pop(i, None)
        if followers is None:
            return
        states, waiting, chained = self._states, self._waiting, self._chained
        before = chained.get(i)
        if before is not None and states[before] != "pending" and states[before] != "running":
            before = None
        for child in followers:
            if states[child] != "pending":
                continue
            if before is not None and chained.get(child) == i:
                chained[child] = before  # waits for that one now (the count stays)
                self._followers.setdefault(before, []).append(child)
                continue
            left = waiting[child] - 1
            waiting[child] = left
            if left == 0 and self.stopped is None:
                self._enqueue(child)

    def _rechain(self) -> None:
        """Lay every resource's chain again, in the topological order closest to the order of adding.

        `add` calls it when a step arrives that steps added before it wait for (a streamed plan's
        step used by an earlier one): a chain laid in the order of adding could then close a cycle.
        Running steps stay first on their resource; steps no longer ready leave the queues.
        """
        states, waiting, chained, followers = self._states, self._waiting, self._chained, self._followers
        live = [i for i, state in enumerate(states) if state == "pending" or state == "running"]
        for b in live:  # unlink the chains
            a = chained.pop(b, None)
            if a is not None and b in followers.get(a, ()):
                followers[a].remove(b)
                waiting[b] -= 1
        # The plan's own edges among the steps not ended; running ones first, then by number.
        count = dict.fromkeys(live, 0)
        for n in live:
            for child in (*self._children(n), *followers.get(n, ())):
                if child in count:
                    count[child] += 1
        ready = [(state != "running", n) for n, state in ((n, states[n]) for n in live) if count[n] == 0]
        heapq.heapify(ready)
        self._last.clear()
        resources, tools = self.resources, self._tools
        while ready:
            _, n = heapq.heappop(ready)
            resource = resources.get(tools[n])
            if resource is not None:
                self._chain(n, resource)
            for child in (*self._children(n), *followers.get(n, ())):
                if child in count:
                    count[child] -= 1
                    if count[child] == 0:
                        heapq.heappush(ready, (states[child] != "running", child))
        for n in live:
            if states[n] != "pending":
                continue
            if self._queued[n] and waiting[n] > 0:
                self._queues[tools[n]].remove(n)
                self._ready -= 1
                self._queued[n] = False
            elif not self._queued[n] and waiting[n] == 0 and self.stopped is None:
                self._enqueue(n)


def _fail_fast_reason(step_id: str) -> str:
    return f"Not started: the plan stopped after step {step_id!r} failed (fail_fast)."
