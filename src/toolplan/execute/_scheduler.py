"""The scheduler core: pure, synchronous bookkeeping of which step may start, and what a failure skips.

No I/O and no asyncio here, so the rules can be property-tested. The executor asks `take_ready`
for steps to start and reports each outcome with `finish`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ("Scheduler", "StepState")

StepState = Literal["pending", "running", "succeeded", "failed", "skipped", "not_run", "cancelled"]


@dataclass(slots=True, eq=False)
class _Node:
    id: str
    index: int  # plan order
    tool: str
    waiting_on: int  # dependencies not yet succeeded
    state: StepState = "pending"
    queued: bool = False
    dependents: list[_Node] = field(default_factory=list["_Node"])


class Scheduler:
    """Eager dataflow: a step is ready the moment its own dependencies have succeeded.

    Args:
        max_concurrency: Steps running at once, plan-wide.
        tool_limits: Steps of one tool running at once (per-tool ``concurrency``).
        fail_fast: After the first failure, start nothing more (`stop` is called by `finish`).
    """

    def __init__(
        self,
        *,
        max_concurrency: int = 20,
        tool_limits: Mapping[str, int] | None = None,
        fail_fast: bool = False,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.max_concurrency = max_concurrency
        self.tool_limits = dict(tool_limits or {})
        self.fail_fast = fail_fast
        self.nodes: dict[str, _Node] = {}
        self.reasons: dict[str, str] = {}  # why a step was skipped / not run
        self.running = 0
        self.running_by_tool: dict[str, int] = {}  # for tools with a limit
        self.stopped: str | None = None
        self._queues: dict[str, deque[_Node]] = {}  # ready steps waiting for capacity, per tool
        self._awaited: dict[str, list[_Node]] = {}  # steps waiting on an id not added yet (streamed plans)
        self._open = 0  # steps not yet in a terminal state
        # Steps that ended without their own outcome (skipped, not run, cancelled), in that order.
        self.ended_unrun: list[str] = []

    # -- building -------------------------------------------------------------------------------

    def add(self, step_id: str, tool: str, deps: Sequence[str]) -> None:
        """Add a step. Dependencies may name steps added later (streamed plans)."""
        nodes = self.nodes
        if step_id in nodes:
            raise ValueError(f"duplicate step {step_id!r}")
        node = _Node(step_id, len(nodes), tool, 0, "pending", False, self._awaited.pop(step_id, []))  # positional
        failed_dep: str | None = None
        for d in deps:
            dep = nodes.get(d)
            if dep is None:
                node.waiting_on += 1
                awaited = self._awaited.get(d)
                if awaited is None:
                    self._awaited[d] = [node]
                else:
                    awaited.append(node)
                continue
            dep.dependents.append(node)
            state = dep.state
            if state == "pending" or state == "running":
                node.waiting_on += 1
            elif state != "succeeded":
                failed_dep = d
        nodes[step_id] = node
        self._open += 1
        if failed_dep is not None:
            self._skip_from(node, nodes[failed_dep])
        elif self.stopped is not None:
            self._end(node, "not_run", self.stopped)
        elif node.waiting_on == 0:
            self._enqueue(node)

    # -- running --------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True when every added step is in a terminal state."""
        return self._open == 0

    def state(self, step_id: str) -> StepState:
        """The step's current state."""
        return self.nodes[step_id].state

    @property
    def has_ready(self) -> bool:
        """True when a step is waiting for capacity and some is free (tool limits aside)."""
        if self.running >= self.max_concurrency or self.stopped is not None:
            return False
        return any(self._queues.values())

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
        queues = self._queues
        if len(queues) == 1 and not self.tool_limits:  # one tool, no per-tool limit: take in order
            for queue in queues.values():
                while queue and room > 0:
                    node = queue.popleft()
                    node.queued = False
                    node.state = "running"
                    out.append(node.id)
                    room -= 1
            self.running += len(out)
            return out
        while room > 0:
            best: _Node | None = None
            for tool, queue in queues.items():
                if not queue:
                    continue
                limit = self.tool_limits.get(tool)
                if limit is not None and self.running_by_tool.get(tool, 0) >= limit:
                    continue
                head = queue[0]
                if best is None or head.index < best.index:
                    best = head
            if best is None:
                break
            queues[best.tool].popleft()
            best.queued = False
            best.state = "running"
            self.running += 1
            room -= 1
            if self.tool_limits:
                self._count(best.tool, 1)
            out.append(best.id)
        return out

    def finish(self, step_id: str, *, succeeded: bool) -> None:
        """Record a running step's outcome: release dependents, or skip them on failure."""
        node = self.nodes[step_id]
        if node.state != "running":
            raise ValueError(f"step {step_id!r} is {node.state}, not running")
        self.running -= 1
        if self.tool_limits:
            self._count(node.tool, -1)
        if not succeeded:
            self._end(node, "failed", None)
            self._skip_dependents(node)
            if self.fail_fast:
                self.stop(f"Not started: the plan stopped after step {step_id!r} failed (fail_fast).")
            return
        node.state = "succeeded"  # what _end does, inlined for the common case
        self._open -= 1
        for child in node.dependents:
            if child.state == "pending":
                child.waiting_on -= 1
                if child.waiting_on == 0:
                    self._enqueue(child)

    def cancel(self, step_id: str, reason: str) -> None:
        """Record that a running step was cancelled (its dependents are skipped)."""
        node = self.nodes[step_id]
        if node.state != "running":
            return
        self.running -= 1
        self._count(node.tool, -1)
        self._end(node, "cancelled", reason)
        self._skip_dependents(node)

    def stop(self, reason: str) -> list[str]:
        """Start nothing more: every pending step ends ``not_run``. Returns the running steps."""
        if self.stopped is None:
            self.stopped = reason
        for queue in self._queues.values():
            for node in queue:
                node.queued = False
            queue.clear()
        for node in self.nodes.values():
            if node.state == "pending":
                self._end(node, "not_run", reason)
        return [sid for sid, node in self.nodes.items() if node.state == "running"]

    def refuse(self, step_id: str, reason: str) -> None:
        """A running step could not start after all (budget): it ends ``not_run``, dependents skip."""
        node = self.nodes[step_id]
        self.running -= 1
        self._count(node.tool, -1)
        self._end(node, "not_run", reason)
        self._skip_dependents(node)

    # -- internals ------------------------------------------------------------------------------

    def _count(self, tool: str, delta: int) -> None:
        """Keep the running count of a tool with a limit (tools without one need none)."""
        if tool in self.tool_limits:
            self.running_by_tool[tool] = self.running_by_tool.get(tool, 0) + delta

    def _enqueue(self, node: _Node) -> None:
        node.queued = True
        queue = self._queues.get(node.tool)
        if queue is None:
            queue = self._queues[node.tool] = deque()
        queue.append(node)

    def _end(self, node: _Node, state: StepState, reason: str | None) -> None:
        if node.queued:
            self._queues[node.tool].remove(node)
            node.queued = False
        node.state = state
        self._open -= 1
        if state != "succeeded" and state != "failed":
            self.ended_unrun.append(node.id)
        if reason is not None:
            self.reasons[node.id] = reason

    def _skip_dependents(self, node: _Node) -> None:
        for child in node.dependents:
            if child.state == "pending":
                self._skip_from(child, node)

    def _skip_from(self, node: _Node, cause: _Node) -> None:
        """Skip ``node`` and its pending transitive dependents because ``cause`` did not succeed."""
        stack = [(node, cause)]
        while stack:
            n, why = stack.pop()
            if n.state != "pending":
                continue
            verb = {"failed": "failed", "cancelled": "was cancelled", "not_run": "did not run"}.get(
                why.state, "was skipped"
            )
            self._end(n, "skipped", f"Skipped because dependency {why.id!r} {verb}.")
            stack.extend((child, n) for child in n.dependents)
