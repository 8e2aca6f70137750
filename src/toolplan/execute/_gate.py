"""How a run with an `ApprovalRule` holds the steps that need a person's answer.

A step the rule marks waits once its arguments are resolved; the run's other steps go on (a
waiting step gives its concurrency slot back). With a callback, the steps waiting at one moment
are asked in one request; without one (or for steps it leaves unanswered), the step is parked: the
run ends when nothing else can run, with status ``pending_approval`` and the request in
`PlanResult.approval`. Resuming with the answers runs the approved steps and nothing that ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ApprovalError, StoreError, UserError
from .._records import maker
from ._ahead import ahead_of_time
from ._approval import Approval, ApprovalCallback, ApprovalRequest, ApprovalRule, PendingStep, edit_problems
from ._events import ApprovalRequested
from ._journal import StoredRun, StoredStep
from ._result import PlanResult, StepError, StepResult

if TYPE_CHECKING:
    from ..plan import CompiledPlan, CompiledStep
    from ..tools import ToolRegistry
    from ._run import PlanRun

__all__ = ("ApprovalGate", "check_answers", "resumed", "waiting_result")

_new_step_result = maker(StepResult)
_TIMED_OUT = "approval timed out"
_CANNOT_WAIT = (
    "it needs a person's approval and no one could be asked (no on_approval callback), and a call made from code "
    "cannot wait for an answer; make the call a step of an execute_tool_plan plan, which can wait"
)
_GATHER_TURNS = 3  # event-loop turns a request waits for steps that became ready together


class ApprovalGate:
    """One run's approvals: the rule, the callback, answers given up front, the steps parked."""

    def __init__(
        self,
        rule: ApprovalRule,
        tools: ToolRegistry,
        callback: ApprovalCallback | None = None,
        answers: Mapping[str, Approval] | None = None,
        asked: ApprovalRequest | None = None,
        *,
        park: bool = True,
    ) -> None:
        self.rule = rule
        # False where a step cannot wait beyond its run (a call from code): unanswered, it is rejected.
        self.park = park
        self.tools = tools
        self.callback = callback
        # Answers not used yet: given up front, or ahead of time for steps not ready yet (kept till they are).
        self.answers: dict[str, Approval] = {} if asked is None else dict(asked.answered)
        self.answers.update(answers or {})
        # The steps a resumed run's request held: they wait (or are answered) without asking the rule again.
        self.asked: dict[str, PendingStep] = {} if asked is None else {p.step_id: p for p in asked.ready}
        self.problems: dict[str, str] = {}
        self.waiting: dict[str, PendingStep] = {}  # parked: they wait beyond this run
        self._dependents: dict[str, tuple[str, ...]] | None = None
        self._queue: list[tuple[PendingStep, asyncio.Future[Approval | None]]] = []
        self._batch: list[tuple[PendingStep, asyncio.Future[Approval | None]]] = []
        self._calling = False
        self._asker: asyncio.Task[None] | None = None

    # -- a step at its gate -----------------------------------------------------------------------

    async def gate(self, run: PlanRun, cs: CompiledStep, args: Any) -> StepResult | Any:
        """The step's arguments to call with (edited, perhaps), or its record when it is not to be called now."""
        step = cs.step
        sid = step.id
        pending = self.asked.get(sid)
        answer = self.answers.pop(sid, None)  # (an answer given ahead of time holds whatever the rule says now)
        if pending is None and answer is None:
            try:
                needed = self.rule.needs_approval(step, self.tools, args)
            except Exception as exc:  # user code: the step fails, coded, and its tool is not called
                message = (
                    f"The approval rule's function raised {type(exc).__name__} for step {sid!r}: {exc}; the step "
                    "was not run. Fix the function."
                )
                return self._record(run, cs, "failed", StepError(kind="approval", message=message), args)
            if not needed:
                return args
        if pending is None:
            pending = self.pending_of(run, cs, args)
        elif pending.expires_at is not None and pending.expires_at <= run.now():
            return self._rejected(run, cs, _TIMED_OUT, args)
        if answer is None and self.callback is not None:
            answer = await self._wait(run, cs, pending)
        if answer is None:
            return self._park(run, cs, pending, args)
        problem = edit_problems(self.tools, step.tool, answer)
        if problem is not None:
            self.problems[sid] = problem
            return self._park(run, cs, pending, args)
        if not answer.approved:
            return self._rejected(run, cs, answer.reason or "rejected by the approver", args)
        return args if answer.arguments is None else dict(answer.arguments)

    def take_up(self, stored: PlanResult | None, compiled: CompiledPlan, queued: ApprovalRequest | None = None) -> None:
        """A stored run taken up: its waiting steps wait (or are answered) as first asked.

        ``queued``: the request of a run that waited and was queued again since (`StoredRun.approval`),
        used when ``stored`` (a run that still waits) has none. A run whose process stopped while a
        step was being asked has no stored request: the answers may then name any step of the plan
        (each is asked again, and answered by them).

        Raises:
            ApprovalError: an answer names a step that does not wait, or its edit does not fit the tool.
        """
        request = queued if stored is None or stored.approval is None else stored.approval
        if request is not None:
            self.asked = {p.step_id: p for p in request.ready}
            self.answers = {**request.answered, **self.answers}
        elif self.answers:
            request = ApprovalRequest(
                run_id="",
                steps=tuple(
                    PendingStep(step_id=sid, tool=cs.step.tool, arguments={}) for sid, cs in compiled.steps.items()
                ),
            )
        if self.answers:
            assert request is not None
            check_answers(request, self.answers, self.tools)

    def pending_of(self, run: PlanRun, cs: CompiledStep, args: Any) -> PendingStep:
        """How ``cs`` is shown to a person, with ``args``; waiting from now."""
        step = cs.step
        d = self.tools.get(step.tool)
        a = run.invoker.annotations(step.tool) if d is None else d.annotations
        now = run.now()
        timeout = self.rule.timeout
        return PendingStep(
            step_id=step.id,
            tool=step.tool,
            arguments=dict(args),
            annotations={
                "read_only": a.read_only,
                "idempotent": a.idempotent,
                "destructive": a.destructive,
                "cost": a.cost,
            },
            rationale=step.rationale,
            dependents=self.dependents(run).get(step.id, ()),
            fallback=None if step.fallback is None else step.fallback.tool,
            requested_at=now,
            expires_at=None if timeout is None else now + timeout,
        )

    def dependents(self, run: PlanRun) -> dict[str, tuple[str, ...]]:
        """Each step's transitive dependents, in plan order (worked out once the run's plan is whole).

        A streamed plan's run, still growing, has only the steps seen so far: they are worked out
        from those, and again once the plan is complete.
        """
        compiled = run.compiled
        if self._dependents is None or compiled is None:
            deps = {sid: cs.deps for sid, cs in run.steps.items()} if compiled is None else compiled.deps
            children: dict[str, list[str]] = {}
            for sid, ds in deps.items():
                for d in ds:
                    children.setdefault(d, []).append(sid)
            order = {sid: i for i, sid in enumerate(deps)}
            out: dict[str, tuple[str, ...]] = {}
            for sid in deps:
                seen: set[str] = set()
                stack = list(children.get(sid, ()))
                while stack:
                    c = stack.pop()
                    if c not in seen:
                        seen.add(c)
                        stack.extend(children.get(c, ()))
                out[sid] = tuple(sorted(seen, key=order.__getitem__))
            if compiled is None:
                return out
            self._dependents = out
        return self._dependents

    # -- asking the callback ----------------------------------------------------------------------

    async def _wait(self, run: PlanRun, cs: CompiledStep, pending: PendingStep) -> Approval | None:
        """Wait for the callback's answer; the step's slot is free meanwhile. None: no answer (it parks)."""
        tool = cs.step.tool
        future: asyncio.Future[Approval | None] = asyncio.get_running_loop().create_future()
        self._queue.append((pending, future))
        run.sched.hold(tool, -1)
        run._relaunch()  # a step waiting for its slot may start
        try:
            self._kick(run)
            left = None if pending.expires_at is None else max(pending.expires_at - run.now(), 0.0)
            try:
                async with asyncio.timeout(left):
                    return await future
            except TimeoutError:
                return Approval.reject(_TIMED_OUT)
        finally:
            run.sched.hold(tool, 1)
            self._leave(future)

    def _kick(self, run: PlanRun) -> None:
        tg = run._tg
        if self._asker is None and self._queue and tg is not None:
            with contextlib.suppress(RuntimeError):  # the run is ending: its steps are being cancelled
                self._asker = tg.create_task(self._ask(run))

    def _leave(self, future: asyncio.Future[Approval | None]) -> None:
        """A step stopped waiting: a callback call no step waits for any more is cancelled."""
        if not future.done():
            future.cancel()
        if self._calling and self._asker is not None and all(f.done() for _, f in self._batch):
            self._asker.cancel()

    async def _ask(self, run: PlanRun) -> None:
        callback = self.callback
        assert callback is not None
        try:
            while True:
                for _ in range(_GATHER_TURNS):
                    await asyncio.sleep(0)
                order = run.compiled.plan.step_ids if run.compiled is not None else ()
                rank = {sid: i for i, sid in enumerate(order)}
                batch = sorted(
                    ((p, f) for p, f in self._queue if not f.done()), key=lambda pf: rank.get(pf[0].step_id, 0)
                )
                self._queue.clear()
                if not batch:
                    return
                ready = tuple(p for p, _ in batch)
                ahead = ahead_of_time(self, run, {p.step_id for p in ready})
                listed = (*ready, *ahead)
                request = ApprovalRequest(
                    run_id=run.run_id,
                    steps=listed,
                    problems={p.step_id: self.problems[p.step_id] for p in listed if p.step_id in self.problems},
                    rule=self.rule.to_dict(),
                    answered=dict(self.answers),
                )
                stored = self._tell(run, request)
                if stored is not None:  # asked only once the request is stored: it outlives this process
                    with contextlib.suppress(StoreError):
                        await stored
                self._batch, self._calling = batch, True
                try:
                    answers: Any = await callback(request)
                except Exception as exc:  # user code: the steps that wait are rejected, and the run goes on
                    answers = _reject(ready, f"the approval callback raised {type(exc).__name__}: {exc}")
                finally:
                    self._calling = False
                if not isinstance(answers, Mapping):
                    shown = type(answers).__name__
                    answers = _reject(ready, f"the approval callback returned {shown}, not a dict of answers")
                self._keep_ahead(ahead, answers)
                for p, f in batch:
                    if not f.done():
                        f.set_result(answers.get(p.step_id))
        finally:
            self._asker = None
            self._batch = []
            if self._queue:
                self._kick(run)

    def _keep_ahead(self, ahead: list[PendingStep], answers: Mapping[str, Any]) -> None:
        """Keep the answers given for steps not ready yet (applied when they are); refuse unusable ones."""
        for p in ahead:
            answer = answers.get(p.step_id)
            if answer is None:
                continue
            problem = edit_problems(self.tools, p.tool, answer)
            if problem is None:
                self.answers[p.step_id] = answer
            else:
                self.problems[p.step_id] = problem

    # -- records ----------------------------------------------------------------------------------

    def _record(self, run: PlanRun, cs: CompiledStep, status: Any, error: StepError | None, args: Any) -> StepResult:
        sid = cs.step.id
        return _new_step_result(
            id=sid,
            tool=cs.step.tool,
            status=status,
            error=error,
            started_at=run.started_at.get(sid) if status != "pending_approval" else None,
            ended_at=run.now() if status != "pending_approval" else None,
            arguments=args,
        )

    def _rejected(self, run: PlanRun, cs: CompiledStep, reason: str, args: Any) -> StepResult:
        message = f"Step {cs.step.id!r} was rejected: {reason}. Its tool was not called."
        return self._record(run, cs, "rejected", StepError(kind="rejected", message=message), args)

    def _park(self, run: PlanRun, cs: CompiledStep, pending: PendingStep, args: Any) -> StepResult:
        if not self.park:
            return self._rejected(run, cs, _CANNOT_WAIT, args)
        self.waiting[cs.step.id] = pending
        return self._record(run, cs, "pending_approval", None, args)

    def parks(self, run: PlanRun, result: StepResult) -> bool:
        """True when ``result`` is a step parked to wait for approval (its slot is given back; dependents wait)."""
        if result.status != "pending_approval":
            return False
        run.sched.hold(run.steps[result.id].step.tool, -1)
        run.results[result.id] = result  # (no event: the run's `ApprovalRequested` says it)
        return True

    def settle(self, run: PlanRun) -> ApprovalRequest | None:
        """The run ends: records for the steps that wait (and those waiting on them); the request, if any."""
        stopped = run.sched.stopped
        waiting = [sid for sid in self.waiting if run.results.get(sid, _NONE).status == "pending_approval"]
        if stopped is not None:  # fail_fast, a store that failed: the waiting steps will not run
            for sid in waiting:
                error = StepError(kind="not_run", message=stopped)
                run.results[sid] = dataclasses.replace(run.results[sid], status="not_run", error=error)
            waiting = []
        ahead = ahead_of_time(self, run, set(waiting)) if waiting else []
        answered = {sid: a for sid, a in self.answers.items() if sid in run.steps and sid not in run.results}
        for sid, cs in run.steps.items():
            if sid not in run.results:
                run.results[sid] = _new_step_result(id=sid, tool=cs.step.tool, status="pending")
        if not waiting:
            return None
        order = {sid: i for i, sid in enumerate(run.steps)}
        waiting.sort(key=order.__getitem__)
        listed = {*waiting, *(p.step_id for p in ahead)}
        problems = {sid: self.problems[sid] for sid in listed if sid in self.problems}
        request = ApprovalRequest(
            run_id=run.run_id,
            steps=(*(self.waiting[s] for s in waiting), *ahead),
            problems=problems,
            rule=self.rule.to_dict(),
            answered=answered,
        )
        self._tell(run, request)
        return request

    @staticmethod
    def _tell(run: PlanRun, request: ApprovalRequest) -> asyncio.Future[None] | None:
        """The event, and for a durable run the stored request (done once committed)."""
        if run.on_event is not None:
            run.emit(ApprovalRequested(run_id=run.run_id, request=request, at=run.now()))
        journal = run.journal
        if journal is None:
            return None
        meter = run.invoker.meter
        for p in request.ready:  # rows that say the step waits: no process takes the run up without a rule
            if p.step_id not in run.results:
                record = _new_step_result(id=p.step_id, tool=p.tool, status="pending_approval", arguments=p.arguments)
                journal.finished(record, meter.calls, meter.cost)
        return journal.event("approval_requested", None, request.to_dict())


_NONE = _new_step_result(id="", tool="", status="pending")


def _reject(steps: tuple[PendingStep, ...], reason: str) -> dict[str, Approval]:
    return {p.step_id: Approval.reject(reason) for p in steps}


def waiting_result(result: PlanResult, request: ApprovalRequest | None) -> PlanResult:
    """``result`` with status ``pending_approval`` and its request, when steps wait."""
    if request is None or result.status == "cancelled":
        return result
    return dataclasses.replace(result, status="pending_approval", approval=request)


def resumed(
    compiled: CompiledPlan,
    tools: ToolRegistry,
    rule: ApprovalRule | None,
    callback: ApprovalCallback | None,
    resume: PlanResult | None,
    answers: Mapping[str, Approval] | None,
    durable: bool = False,
) -> tuple[ApprovalGate | None, StoredRun | None]:
    """The gate of a run given ``approval=``, and what a resumed run reuses of ``resume``.

    ``durable``: the run is a stored one, named by its id; ``answers`` are then checked once the
    store has given its waiting request (`ApprovalGate.take_up`).

    Raises:
        UserError: the options do not fit together, or ``resume`` is not a waiting result of this plan.
        ApprovalError: an answer names a step that does not wait, or its edit does not fit the tool.
    """
    if rule is None:
        if resume is not None or answers is not None or callback is not None:
            raise UserError(
                "on_approval=, resume= and approvals= need the run's rule: pass approval=ApprovalRule(...) as well."
            )
        return None, None
    if rule is not None and not isinstance(rule, ApprovalRule):
        raise UserError(f"approval= takes an ApprovalRule, got {type(rule).__name__}.")
    if resume is None:
        if answers is not None and not durable:
            raise UserError(
                "approvals= answers a waiting run: pass the result that waits as resume= too (or, for a stored "
                "run, store= and its run_id=)."
            )
        return ApprovalGate(rule, tools, callback, answers), None
    request = resume.approval
    if resume.status != "pending_approval" or request is None:
        raise UserError(
            f"resume= takes a result that waits for approval (status 'pending_approval'), got status {resume.status!r}."
        )
    if set(resume.steps) != set(compiled.steps):
        raise UserError("resume= holds the result of another plan: resume with the plan that made it.")
    check_answers(request, answers or {}, tools)
    stored = StoredRun(
        run_id=resume.run_id,
        status="running",
        steps={
            sid: StoredStep(
                id=sid, status=r.status, attempt=r.attempts, call_tool=r.tool, fallback=r.used_fallback, result=r
            )
            for sid, r in resume.steps.items()
        },
    )
    return ApprovalGate(rule, tools, callback, answers, request), stored


def check_answers(request: ApprovalRequest, answers: Mapping[str, Approval], tools: ToolRegistry) -> None:
    """Raise `ApprovalError` naming every answer that cannot be used (nothing runs then)."""
    if not isinstance(answers, Mapping):
        raise ApprovalError({"": f"approvals must be a dict of step id to Approval, got {type(answers).__name__}"})
    waiting = {p.step_id: p for p in request.steps}
    problems: dict[str, str] = {}
    for sid, answer in answers.items():
        pending = waiting.get(sid)
        given: object = answer  # (any value, from untyped callers)
        if pending is None and sid in request.answered:  # answered ahead of time: answered again
            if not isinstance(given, Approval):
                problems[str(sid)] = f"an answer must be an Approval, got {type(given).__name__}"
            continue  # (an edit is checked when the step becomes ready)
        if pending is None:
            shown = ", ".join(map(repr, waiting)) or "none"
            problems[str(sid)] = f"step {sid!r} does not wait for approval (waiting: {shown})"
            continue
        problem = edit_problems(tools, pending.tool, answer)
        if problem is not None:
            problems[sid] = problem
    if problems:
        raise ApprovalError(problems)
