"""``toolplan run --approve``: which steps need a person's approval, and asking for it on the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Mapping, Sequence

from .._errors import UserError
from .._json import dumps
from ..execute import Approval, ApprovalRequest, ApprovalRule, PendingStep
from ._common import err
from ._render import say

__all__ = ("APPROVE_HELP", "TerminalApprover", "approval_rule")

APPROVE_HELP = (
    "Ask before steps with side effects run. 'ask' prompts on this terminal for each waiting step "
    "(y approves; n, or n REASON, rejects; a approves it and every later step). Which steps: 'writes' "
    "(tools not read_only: the default with 'ask' alone), 'destructive', 'all', 'tool:NAME', 'cost-above:N'. "
    "Repeat to combine."
)
_MAX_ANSWER = 2000  # characters of an answer line kept


def approval_rule(values: Sequence[str], timeout: float | None = None) -> tuple[ApprovalRule, bool]:
    """The rule the ``--approve`` values make, and whether they ask on the terminal.

    Raises:
        UserError: a value is not one of the forms above (the message lists them).
    """
    ask = False
    every = destructive = writes = False
    tools: set[str] = set()
    cost: float | None = None
    for value in values:
        v = value.strip()
        if v == "ask":
            ask = True
        elif v == "all":
            every = True
        elif v == "destructive":
            destructive = True
        elif v == "writes":
            writes = True
        elif v.startswith("tool:") and v[5:].strip():
            tools.add(v[5:].strip())
        elif v.startswith("cost-above:"):
            try:
                cost = float(v[len("cost-above:") :])
            except ValueError:
                raise UserError(f"--approve {value!r}: cost-above needs a number, as in cost-above:2.5.") from None
        else:
            raise UserError(
                f"--approve {value!r} is not known: use ask, all, writes, destructive, tool:NAME or cost-above:N."
            )
    if not (every or destructive or writes or tools or cost is not None):
        writes = True  # 'ask' alone: every step with a side effect
    rule = ApprovalRule(
        every=every,
        destructive=destructive,
        not_read_only=writes,
        tools=frozenset(tools),
        cost_above=cost,
        timeout=timeout,
    )
    return rule, ask


class TerminalApprover:
    """Asks on stderr and reads each answer from stdin (in a thread: the run goes on meanwhile)."""

    def __init__(self) -> None:
        self.approve_rest = False  # 'a' was answered: every later step is approved

    async def __call__(self, request: ApprovalRequest) -> Mapping[str, Approval]:
        answers: dict[str, Approval] = {}
        for pending in request.ready:  # (the steps listed ahead of time are asked when they are ready)
            if self.approve_rest:
                answers[pending.step_id] = Approval()
                continue
            _show(pending, request.problems.get(pending.step_id))
            sys.stderr.write("Approve? [y]es / [n]o [REASON] / [a]ll: ")
            sys.stderr.flush()
            line = await _read_line()
            if not line:  # stdin closed: nobody can answer
                reason = "no answer on the terminal (stdin closed)"
                for p in request.ready:
                    answers.setdefault(p.step_id, Approval.reject(reason))
                break
            word, _, reason = line.strip()[:_MAX_ANSWER].partition(" ")
            if word.lower() in ("y", "yes"):
                answers[pending.step_id] = Approval()
            elif word.lower() in ("a", "all"):
                answers[pending.step_id] = Approval()
                self.approve_rest = True
            else:
                answers[pending.step_id] = Approval.reject(reason.strip() or "rejected on the terminal")
        if self.approve_rest:
            answers.update((p.step_id, Approval()) for p in request.ahead)
        return answers


async def _read_line() -> str:
    """A line of stdin, read in a daemon thread: a run that ends (a timeout) does not wait for the person."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def done(line: str) -> None:
        if not future.done():
            future.set_result(line)

    def read() -> None:
        line = sys.stdin.readline()
        with contextlib.suppress(RuntimeError):  # the run, and its loop, ended first
            loop.call_soon_threadsafe(done, line)

    threading.Thread(target=read, name="toolplan-approve", daemon=True).start()
    return await future


def _show(pending: PendingStep, problem: str | None) -> None:
    flags = [k for k in ("destructive", "read_only", "idempotent") if pending.annotations.get(k)]
    say(err, f"Step {pending.step_id!r} wants to call {pending.tool} {dumps(dict(pending.arguments))}", "bold")
    if flags:
        say(err, f"  tool: {', '.join(flags)}", "dim")
    if pending.rationale:
        say(err, f"  why: {pending.rationale}", "dim")
    if pending.dependents:
        say(err, f"  skipped if rejected: {', '.join(pending.dependents)}", "dim")
    if problem:
        say(err, f"  earlier answer refused: {problem}", "yellow")
