"""Human approval of a plan's side effects: the rule, waiting steps, answers, pending results and resume."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from approval_support import CALLS, PLAN, TOOLS

from toolplan import Approval, ApprovalError, ApprovalRequest, ApprovalRule, PlanResult, Step, UserError, tool
from toolplan.execute import ApprovalRequested, PlanEvent, execute_plan
from toolplan.tools import ToolRegistry


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def test_rule_needs_a_criterion_and_checks_its_options() -> None:
    with pytest.raises(UserError, match="marks no step"):
        ApprovalRule()
    with pytest.raises(UserError, match="timeout"):
        ApprovalRule(destructive=True, timeout=0)
    with pytest.raises(UserError, match="cost_above"):
        ApprovalRule(cost_above=-1)
    with pytest.raises(UserError, match="tool names"):
        ApprovalRule(tools="delete")  # type: ignore[arg-type]


def test_rule_marks_steps_by_annotation_name_cost_and_function() -> None:
    registry = ToolRegistry.of(TOOLS)
    d = Step(id="d", tool="delete", arguments={"path": "/x"})
    f = Step(id="f", tool="find", arguments={"name": "x"})
    n = Step(id="n", tool="notify", arguments={"message": "hi"})
    assert ApprovalRule(destructive=True).needs_approval(d, registry)
    assert not ApprovalRule(destructive=True).needs_approval(n, registry)
    assert ApprovalRule(not_read_only=True).needs_approval(n, registry)
    assert not ApprovalRule(not_read_only=True).needs_approval(f, registry)
    assert ApprovalRule(tools=frozenset({"notify"})).needs_approval(n, registry)
    assert ApprovalRule(cost_above=0.5).needs_approval(f, registry)
    assert not ApprovalRule(cost_above=1).needs_approval(f, registry)
    loud = ApprovalRule(when=lambda step, tool, args: "!" in str(args.get("message", "")))
    assert loud.needs_approval(n, registry, {"message": "hi!"})
    assert not loud.needs_approval(n, registry)
    # A fallback that is destructive makes the step need approval too.
    fb = Step(id="x", tool="find", arguments={"name": "x"}, fallback=_fallback("delete", {"path": "/x"}))
    assert ApprovalRule(destructive=True).needs_approval(fb, registry)


def _fallback(tool_name: str, arguments: dict[str, Any]) -> Any:
    from toolplan.plan import Fallback

    return Fallback(tool=tool_name, arguments=arguments)


async def test_without_a_rule_nothing_changes() -> None:
    result = await execute_plan(PLAN, TOOLS)
    assert result.ok and result.approval is None
    assert [c[0] for c in CALLS].count("delete") == 1


async def test_callback_approves_and_the_step_runs_with_resolved_arguments() -> None:
    requests: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Mapping[str, Approval]:
        requests.append(request)
        return request.approve_all()

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=approve)
    assert result.ok, result.to_model_text()
    assert len(requests) == 1
    (pending,) = requests[0].steps
    assert pending.step_id == "d" and pending.tool == "delete"
    assert pending.arguments == {"path": "/tmp/a.txt"}
    assert pending.rationale == "free space"
    assert pending.dependents == ("n",)
    assert pending.annotations["destructive"] is True
    assert ("delete", "/tmp/a.txt") in CALLS


async def test_other_steps_go_on_while_a_step_waits() -> None:
    asked = asyncio.Event()
    release = asyncio.Event()
    probed = asyncio.Event()

    @tool(read_only=True)
    async def probe(name: str) -> str:
        """A read-only lookup that says when it ran."""
        probed.set()
        return name

    async def slow_person(request: ApprovalRequest) -> Mapping[str, Approval]:
        asked.set()
        await release.wait()
        return request.approve_all()

    plan = {
        "steps": [
            {"id": "d", "tool": "delete", "arguments": {"path": "/x"}},
            {"id": "p", "tool": "probe", "arguments": {"name": "b"}},
        ]
    }
    rule = ApprovalRule(destructive=True)
    run = asyncio.ensure_future(
        execute_plan(plan, [*TOOLS, probe], approval=rule, on_approval=slow_person, max_concurrency=1)
    )
    await asked.wait()
    await probed.wait()  # the read-only lookup runs while the delete waits (one slot)
    assert ("delete", "/x") not in CALLS
    release.set()
    result = await run
    assert result.ok
    assert CALLS[-1] == ("delete", "/x")


async def test_rejection_skips_dependents_and_tells_the_model() -> None:
    async def no(request: ApprovalRequest) -> Mapping[str, Approval]:
        return {"d": Approval.reject("that file is still needed")}

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=no)
    assert result.status == "failed"
    assert result.steps["d"].status == "rejected"
    assert result.steps["d"].error is not None and result.steps["d"].error.kind == "rejected"
    assert result.steps["n"].status == "skipped"
    assert result.steps["g"].ok
    assert not any(c[0] in ("delete", "notify") for c in CALLS)
    text = json.loads(result.to_model_text())
    assert "that file is still needed" in text["errors"]["d"]
    assert text["errors"]["d"].startswith("rejected:")


async def test_edited_arguments_are_used_and_checked() -> None:
    async def edit(request: ApprovalRequest) -> Mapping[str, Approval]:
        return {"d": Approval.approve({"path": "/tmp/other.txt"})}

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=edit)
    assert result.ok
    assert ("delete", "/tmp/other.txt") in CALLS
    assert result.steps["d"].arguments == {"path": "/tmp/other.txt"}

    CALLS.clear()

    async def bad_edit(request: ApprovalRequest) -> Mapping[str, Approval]:
        return {"d": Approval.approve({"path": 42})}

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=bad_edit)
    assert result.status == "pending_approval"
    assert result.approval is not None and "d" in result.approval.problems
    assert ("delete", 42) not in CALLS and not any(c[0] == "delete" for c in CALLS)


async def test_timeout_rejects_a_step_left_unanswered() -> None:
    never = asyncio.Event()

    async def away(request: ApprovalRequest) -> Mapping[str, Approval]:
        await never.wait()
        return {}

    rule = ApprovalRule(destructive=True, timeout=0.05)
    result = await execute_plan(PLAN, TOOLS, approval=rule, on_approval=away)
    d = result.steps["d"]
    assert d.status == "rejected" and d.error is not None and "approval timed out" in d.error.message
    assert result.steps["n"].status == "skipped"
    assert result.steps["g"].ok


async def test_a_callback_that_raises_rejects_its_steps() -> None:
    async def broken(request: ApprovalRequest) -> Mapping[str, Approval]:
        raise RuntimeError("no person here")

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=broken)
    d = result.steps["d"]
    assert d.status == "rejected" and d.error is not None and "no person here" in d.error.message


async def test_a_rule_function_that_raises_fails_the_step() -> None:
    def bad(step: Any, tool: Any, arguments: Any) -> bool:
        raise ValueError("oops")

    result = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(when=bad))
    assert result.steps["f"].status == "failed"
    assert result.steps["f"].error is not None and result.steps["f"].error.kind == "approval"
    assert CALLS == []


async def test_several_waiting_steps_come_in_one_request() -> None:
    requests: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Mapping[str, Approval]:
        requests.append(request)
        return request.approve_all()

    plan = {"steps": [{"id": f"d{i}", "tool": "delete", "arguments": {"path": f"/{i}"}} for i in range(3)]}
    result = await execute_plan(plan, TOOLS, approval=ApprovalRule(destructive=True), on_approval=approve)
    assert result.ok
    assert [r.step_ids for r in requests] == [("d0", "d1", "d2")]


# -- pending result and resume ---------------------------------------------------------------------


async def test_without_a_callback_the_run_returns_waiting_and_resumes() -> None:
    events: list[PlanEvent] = []
    rule = ApprovalRule(destructive=True)
    waiting = await execute_plan(PLAN, TOOLS, approval=rule, on_event=events.append)
    assert waiting.status == "pending_approval"
    assert waiting.approval is not None and waiting.approval.step_ids == ("d",)
    assert waiting.steps["d"].status == "pending_approval"
    assert waiting.steps["d"].arguments == {"path": "/tmp/a.txt"}
    assert waiting.steps["n"].status == "pending"
    assert waiting.steps["f"].ok and waiting.steps["g"].ok
    assert any(isinstance(e, ApprovalRequested) for e in events)
    assert sorted(CALLS) == [("find", "a.txt"), ("find", "b.txt")]
    assert json.loads(waiting.to_model_text())["pending_approval"] == ["d"]

    CALLS.clear()
    done = await execute_plan(PLAN, TOOLS, approval=rule, resume=waiting, approvals=waiting.approval.approve_all())
    assert done.ok, done.to_model_text()
    assert done.run_id == waiting.run_id
    assert CALLS == [("delete", "/tmp/a.txt"), ("notify", "deleted /tmp/a.txt")]  # nothing that ran runs again
    assert done.steps["f"].reused and done.steps["g"].reused


async def test_resume_survives_a_json_round_trip_and_can_reject() -> None:
    rule = ApprovalRule(destructive=True)
    waiting = await execute_plan(PLAN, TOOLS, approval=rule)
    again = PlanResult.from_dict(json.loads(json.dumps(waiting.to_dict())))
    assert again.approval == waiting.approval
    CALLS.clear()
    done = await execute_plan(PLAN, TOOLS, approval=rule, resume=again, approvals={"d": Approval.reject("no")})
    assert done.steps["d"].status == "rejected" and done.steps["n"].status == "skipped"
    assert CALLS == []


async def test_resume_refuses_bad_answers_and_runs_nothing() -> None:
    rule = ApprovalRule(destructive=True)
    waiting = await execute_plan(PLAN, TOOLS, approval=rule)
    CALLS.clear()
    with pytest.raises(ApprovalError) as caught:
        await execute_plan(
            PLAN,
            TOOLS,
            approval=rule,
            resume=waiting,
            approvals={"d": Approval.approve({"path": ["no"]}), "zzz": Approval()},
        )
    assert caught.value.code == "invalid_approval"
    assert set(caught.value.problems) == {"d", "zzz"}
    assert CALLS == []
    with pytest.raises(UserError, match="approval=ApprovalRule"):
        await execute_plan(PLAN, TOOLS, resume=waiting, approvals={})


async def test_resume_without_answers_keeps_waiting_and_expiry_rejects() -> None:
    rule = ApprovalRule(destructive=True, timeout=0.01)
    waiting = await execute_plan(PLAN, TOOLS, approval=rule)
    assert waiting.approval is not None and waiting.approval.steps[0].expires_at is not None
    expires = waiting.approval.steps[0].expires_at
    still = await execute_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True), resume=waiting)
    assert still.status == "pending_approval"
    # The deadline is the one first asked with (by the run's clock): it does not restart on resume.
    assert still.approval is not None and still.approval.steps[0].expires_at == expires
    await asyncio.sleep(0.02)  # let the approval deadline pass (a real deadline: nothing else to wait on)
    late = await execute_plan(PLAN, TOOLS, approval=rule, resume=still, approvals=still.approval.approve_all())
    d = late.steps["d"]
    assert d.status == "rejected" and d.error is not None and "approval timed out" in d.error.message
    assert not any(c[0] == "delete" for c in CALLS)


async def test_stream_plan_takes_the_rule_and_tells_the_request() -> None:
    from toolplan import stream_plan

    async with stream_plan(PLAN, TOOLS, approval=ApprovalRule(destructive=True)) as events:
        kinds = [event.kind async for event in events]
    assert "approval_requested" in kinds
    assert events.result is not None and events.result.status == "pending_approval"


def test_alternatives_and_fallbacks_count_for_the_rule() -> None:
    registry = ToolRegistry.of(TOOLS)
    either = Step(id="e", tool="find|notify", arguments={"name": "x"}, one_of=("find", "notify"))
    assert ApprovalRule(not_read_only=True).needs_approval(either, registry)
    assert not ApprovalRule(destructive=True).needs_approval(either, registry)
    assert ApprovalRule(tools=frozenset({"notify"})).needs_approval(either, registry)


def test_the_live_feed_stores_the_request_as_a_durable_run_does() -> None:
    from toolplan._ui._feed import record_of

    request = ApprovalRequest(run_id="r", steps=())
    assert record_of(ApprovalRequested(run_id="r", request=request, at=1.0)) == (
        "approval_requested",
        None,
        request.to_dict(),
        1.0,
    )


async def test_a_rejection_does_not_stop_a_fail_fast_plan() -> None:
    async def no(request: ApprovalRequest) -> Mapping[str, Approval]:
        return request.reject_all("no")

    result = await execute_plan(
        PLAN, TOOLS, approval=ApprovalRule(destructive=True), on_approval=no, failure_mode="fail_fast"
    )
    assert result.steps["d"].status == "rejected"
    error = result.steps["n"].error
    assert error is not None and error.message == "Skipped because dependency 'd' did not run."
    assert result.steps["g"].ok
