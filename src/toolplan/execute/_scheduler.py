"""The scheduler core: pure, synchronous bookkeeping of which step may start, and what a failure skips.

No I/O and no asyncio here, so the rules can be property-tested. The executor asks `take_ready`
for steps to start and reports each outcome with `finish`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ("Scheduler", "StepState")

StepState = Literal["pending", "running", "succeeded", "failed", "skipped", "not_run", "cancelled"]


@dataclass(slots=True)
class _Node:
    index: int
    tool: str
    deps: tuple[str, ...]
    waiting_on: int  # dependencies not yet succeeded
    state: StepState = "pending"
    queued: bool = False


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
        self.dependents: dict[str, list[str]] = {}
        self.reasons: dict[str, str] = {}  # why a step was skipped / not run
        self.running = 0
        self.running_by_tool: dict[str, int] = {}
        self.stopped: str | None = None
        self._queues: dict[str, deque[str]] = {}  # ready steps waiting for capacity, per tool
        self._open = 0  # steps not yet in a terminal state
        # Steps that ended without their own outcome (skipped, not run, cancelled), in that order.
        self.ended_unrun: list[str] = []

    # -- building -------------------------------------------------------------------------------

    def add(self, step_id: str, tool: str, deps: Sequence[str]) -> None:
        """Add a step. Dependencies may name steps added later (streamed plans)."""
        if step_id in self.nodes:
            raise ValueError(f"duplicate step {step_id!r}")
        unmet = 0
        failed_dep: str | None = None
        for d in deps:
            node = self.nodes.get(d)
            if node is None or node.state in ("pending", "running"):
                unmet += 1
            elif node.state != "succeeded":
                failed_dep = d
        self.dependents[step_id] = self.dependents.get(step_id, [])
        for d in deps:
            self.dependents.setdefault(d, []).append(step_id)
        node = _Node(len(self.nodes), tool, tuple(deps), unmet)
        self.nodes[step_id] = node
        self._open += 1
        if failed_dep is not None:
            self._skip_from(step_id, failed_dep)
        elif self.stopped is not None:
            self._end(step_id, "not_run", self.stopped)
        elif unmet == 0:
            self._enqueue(step_id)

    # -- running --------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True when every added step is in a terminal state."""
        return self._open == 0

    def state(self, step_id: str) -> StepState:
        """The step's current state."""
        return self.nodes[step_id].state

    def take_ready(self) -> list[str]:
        """Steps to start now, in plan order among tools, within the concurrency limits.

        They are marked running; the caller must `finish` each of them.
        """
        out: list[str] = []
        while self.running < self.max_concurrency and self.stopped is None:
            best: str | None = None
            best_index = -1
            for tool, queue in self._queues.items():
                if not queue:
                    continue
                limit = self.tool_limits.get(tool)
                if limit is not None and self.running_by_tool.get(tool, 0) >= limit:
                    continue
                head = queue[0]
                index = self.nodes[head].index
                if best is None or index < best_index:
                    best, best_index = head, index
            if best is None:
                break
            node = self.nodes[best]
            self._queues[node.tool].popleft()
            node.queued = False
            node.state = "running"
            self.running += 1
            self.running_by_tool[node.tool] = self.running_by_tool.get(node.tool, 0) + 1
            out.append(best)
        return out

    def finish(self, step_id: str, *, succeeded: bool) -> None:
        """Record a running step's outcome: release dependents, or skip them on failure."""
        node = self.nodes[step_id]
        if node.state != "running":
            raise ValueError(f"step {step_id!r} is {node.state}, not running")
        self.running -= 1
        self.running_by_tool[node.tool] -= 1
        self._end(step_id, "succeeded" if succeeded else "failed", None)
        if succeeded:
            for child in self.dependents.get(step_id, ()):
                c = self.nodes.get(child)
                if c is None or c.state != "pending":
                    continue
                c.waiting_on -= 1
                if c.waiting_on == 0:
                    self._enqueue(child)
        else:
            for child in self.dependents.get(step_id, ()):
                if child in self.nodes and self.nodes[child].state == "pending":
                    self._skip_from(child, step_id)
            if self.fail_fast:
                self.stop(f"Not started: the plan stopped after step {step_id!r} failed (fail_fast).")

    def cancel(self, step_id: str, reason: str) -> None:
        """Record that a running step was cancelled (its dependents are skipped)."""
        node = self.nodes[step_id]
        if node.state != "running":
            return
        self.running -= 1
        self.running_by_tool[node.tool] -= 1
        self._end(step_id, "cancelled", reason)
        for child in self.dependents.get(step_id, ()):
            if child in self.nodes and self.nodes[child].state == "pending":
                self._skip_from(child, step_id)

    def stop(self, reason: str) -> list[str]:
        """Start nothing more: every pending step ends ``not_run``. Returns the running steps."""
        if self.stopped is None:
            self.stopped = reason
        for queue in self._queues.values():
            for sid in queue:
                self.nodes[sid].queued = False
            queue.clear()
        for sid, node in self.nodes.items():
            if node.state == "pending":
                self._end(sid, "not_run", reason)
        return [sid for sid, node in self.nodes.items() if node.state == "running"]

    def refuse(self, step_id: str, reason: str) -> None:
        """A running step could not start after all (budget): it ends ``not_run``, dependents skip."""
        node = self.nodes[step_id]
        self.running -= 1
        self.running_by_tool[node.tool] -= 1
        self._end(step_id, "not_run", reason)
        for child in self.dependents.get(step_id, ()):
            if child in self.nodes and self.nodes[child].state == "pending":
                self._skip_from(child, step_id)

    # -- internals ------------------------------------------------------------------------------

    def _enqueue(self, step_id: str) -> None:
        node = self.nodes[step_id]
        node.queued = True
        queue = self._queues.get(node.tool)
        if queue is None:
            queue = self._queues[node.tool] = deque()
        queue.append(step_id)

    def _end(self, step_id: str, state: StepState, reason: str | None) -> None:
        node = self.nodes[step_id]
        if node.queued:
            self._queues[node.tool].remove(step_id)
            node.queued = False
        node.state = state
        self._open -= 1
        if state != "succeeded" and state != "failed":
            self.ended_unrun.append(step_id)
        if reason is not None:
            self.reasons[step_id] = reason

    def _skip_from(self, step_id: str, cause: str) -> None:
        """Skip ``step_id`` and its pending transitive dependents because ``cause`` did not succeed."""
        stack = [(step_id, cause)]
        while stack:
            sid, why = stack.pop()
            node = self.nodes[sid]
            if node.state != "pending":
                continue
            cause_state = self.nodes[why].state
            verb = {"failed": "failed", "cancelled": "was cancelled", "not_run": "did not run"}.get(
                cause_state, "was skipped"
            )
            self._end(sid, "skipped", f"Skipped because dependency {why!r} {verb}.")
            for child in self.dependents.get(sid, ()):
                if child in self.nodes:
                    stack.append((child, sid))
