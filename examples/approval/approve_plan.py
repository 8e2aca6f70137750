"""Human approval of a plan's side effects, in process.

Run it: ``python examples/approval/approve_plan.py``. It runs one plan three ways:

1. with a callback that approves the plan's one destructive step after looking at it;
2. without a callback: the run stops with status ``pending_approval`` once nothing else can run,
   and is resumed with a rejection (nothing that ran runs again);
3. with an edit: the person approves with other arguments, checked against the tool's schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from toolplan import Approval, ApprovalRequest, ApprovalRule, execute_plan, tool

calls: list[str] = []


@tool(read_only=True)
def find_old_files(folder: str) -> list[str]:
    """The files in a folder not opened for a year."""
    calls.append("find_old_files")
    return [f"{folder}/2019.log", f"{folder}/2020.log"]


@tool(destructive=True)
def delete_files(paths: list[str]) -> int:
    """Delete files; returns how many."""
    calls.append(f"delete_files {paths}")
    return len(paths)


@tool
def post_message(text: str) -> str:
    """Post a message to the team channel."""
    calls.append("post_message")
    return "posted"


TOOLS = [find_old_files, delete_files, post_message]
PLAN = {
    "steps": [
        {"id": "old", "tool": "find_old_files", "arguments": {"folder": "/var/log/app"}},
        {"id": "rm", "tool": "delete_files", "arguments": {"paths": "$ref:old"}, "rationale": "free disk space"},
        {"id": "tell", "tool": "post_message", "arguments": {"text": "Deleted {{rm}} old log files."}},
    ]
}
RULE = ApprovalRule(destructive=True)


async def main() -> None:
    async def person(request: ApprovalRequest) -> Mapping[str, Approval]:
        for p in request.steps:
            print(f"asked: {p.step_id} calls {p.tool} {dict(p.arguments)}; dependents {list(p.dependents)}")
        return request.approve_all()

    result = await execute_plan(PLAN, TOOLS, approval=RULE, on_approval=person)
    print(f"1. {result.status}: {result.outputs['tell']}")

    calls.clear()
    waiting = await execute_plan(PLAN, TOOLS, approval=RULE)
    assert waiting.approval is not None
    print(f"2. {waiting.status}, waiting: {list(waiting.approval.step_ids)}, calls so far: {calls}")
    done = await execute_plan(
        PLAN, TOOLS, approval=RULE, resume=waiting, approvals={"rm": Approval.reject("keep the 2020 logs")}
    )
    print(f"   resumed: {done.status}; rm {done.steps['rm'].status}, tell {done.steps['tell'].status}")
    print(f"   the model reads: {done.to_model_text()}")

    calls.clear()

    async def editor(request: ApprovalRequest) -> Mapping[str, Approval]:
        return {"rm": Approval.approve({"paths": ["/var/log/app/2019.log"]})}

    edited = await execute_plan(PLAN, TOOLS, approval=RULE, on_approval=editor)
    print(f"3. {edited.status}: {calls[1]}")


if __name__ == "__main__":
    asyncio.run(main())
