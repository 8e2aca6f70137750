"""A chaining plan (clear-ai's planner) runs in its executionOrder, one step at a time, and stops at the first failure.

Run: python examples/chaining/execution_order.py
"""

from __future__ import annotations

from typing import Any

from toolplan import ToolError, execute_plan_sync, tool


@tool
def create_user(name: str) -> dict[str, Any]:
    """Create a user."""
    return {"id": 7, "name": name}


@tool
def create_blog(user_id: int, title: str) -> dict[str, Any]:
    """Create a blog post."""
    raise ToolError("the blog service is down")


@tool
def send_email(to: str, text: str) -> str:
    """Send an email."""
    return f"sent to {to}"


PLAN = {
    "tools": [
        {"name": "create_user", "parameters": {"name": "Ada"}},
        {"name": "create_blog", "parameters": {"user_id": "{{create_user.id}}", "title": "Hello"}},
        {"name": "send_email", "parameters": {"to": "ada@example.com", "text": "Your blog is up"}},
    ],
    "executionOrder": ["create_user", "create_blog", "send_email"],
}


def main() -> None:
    tools = [create_user, create_blog, send_email]
    result = execute_plan_sync(PLAN, tools)
    for sid, step in result.steps.items():
        why = f"  ({step.error.message})" if step.error is not None else ""
        print(f"{sid:12} {step.status}{why}")
    # The plan may ask otherwise: go on after a failure (still in order), or also run steps at once.
    forward = execute_plan_sync({**PLAN, "failure_mode": "fail_forward"}, tools)
    print("fail_forward: send_email", forward.steps["send_email"].status)
    parallel = execute_plan_sync({**PLAN, "parallel": True, "failure_mode": "fail_forward"}, tools)
    print("parallel: send_email", parallel.steps["send_email"].status)


if __name__ == "__main__":
    main()
