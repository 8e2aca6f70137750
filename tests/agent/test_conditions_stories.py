"""Conditional steps and computed arguments as users of the systems toolplan takes over from write them.

clear-ai's chaining planner: "if the blog was created, create a comment"; cogent's executors: check
inventory, then purchase or back-order (two steps with opposite conditions); NESTFUL's gold
sequences: arithmetic on a reference (``3 * price``).
"""

from __future__ import annotations

import json
from typing import Any

from toolplan import Agent, tool
from toolplan.execute import execute_plan
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import ScriptedModel

DONE: list[str] = []


@tool
def create_blog(title: str) -> dict[str, Any]:
    """Create a blog post."""
    DONE.append(f"blog:{title}")
    return {"success": title != "", "blog": {"id": 41, "title": title}}


@tool
def create_comment(blog_id: int, text: str) -> dict[str, Any]:
    """Comment on a blog post."""
    DONE.append(f"comment:{blog_id}")
    return {"id": 1, "blog_id": blog_id, "text": text}


@tool
def check_inventory(sku: str) -> dict[str, Any]:
    """How many of an item are in stock, and its price."""
    return {"sku": sku, "available": {"pen": 12}.get(sku, 0), "price": 2.5}


@tool
def purchase(sku: str, quantity: int, total: float) -> str:
    """Buy an item."""
    DONE.append(f"purchase:{sku}:{quantity}:{total}")
    return f"order for {quantity} {sku}"


@tool
def back_order(sku: str) -> str:
    """Order an item that is out of stock."""
    DONE.append(f"back_order:{sku}")
    return f"back-order for {sku}"


async def test_clear_ai_if_the_blog_was_created_create_a_comment() -> None:
    def plan(title: str) -> dict[str, Any]:
        return {
            "tools": [
                {"name": "create_blog", "parameters": {"title": title}},
                {
                    "name": "create_comment",
                    "parameters": {"blog_id": "{{create_blog.blog.id}}", "text": "First!"},
                    "dependsOn": ["create_blog"],
                    "when": "{{create_blog.success}}",
                },
            ],
            "executionOrder": ["create_blog", "create_comment"],
        }

    DONE.clear()
    created = await execute_plan(plan("Hello"), [create_blog, create_comment])
    assert created.status == "succeeded" and DONE == ["blog:Hello", "comment:41"]
    DONE.clear()
    not_created = await execute_plan(plan(""), [create_blog, create_comment])
    assert DONE == ["blog:"]
    comment = not_created.steps["create_comment"]
    assert comment.status == "skipped" and comment.error is not None
    assert comment.error.message == "Condition false: {{create_blog.success}} ({{create_blog.success}} is false)."
    assert not_created.status == "succeeded"


def _plan_call(sku: str, quantity: int) -> AssistantMessage:
    plan = {
        "steps": [
            {"id": "stock", "tool": "check_inventory", "arguments": {"sku": sku}},
            {
                "id": "buy",
                "tool": "purchase",
                "arguments": {
                    "sku": sku,
                    "quantity": quantity,
                    "total": {"$op": "*", "args": [quantity, "$ref:stock.price"]},
                },
                "when": {"$op": ">=", "args": ["$ref:stock.available", quantity]},
            },
            {
                "id": "later",
                "tool": "back_order",
                "arguments": {"sku": sku},
                "when": {"$op": "<", "args": ["$ref:stock.available", quantity]},
            },
        ],
        "output_steps": ["buy", "later"],
    }
    return AssistantMessage(tool_calls=(ToolCall(id="p", name="execute_tool_plan", arguments=json.dumps(plan)),))


async def test_cogent_check_inventory_then_purchase_or_back_order() -> None:
    tools = [check_inventory, purchase, back_order]
    for sku, quantity, done, skipped in (
        ("pen", 4, "purchase:pen:4:10.0", "later"),
        ("ink", 1, "back_order:ink", "buy"),
    ):
        DONE.clear()
        model = ScriptedModel([_plan_call(sku, quantity), "done"])
        result = await Agent(model=model, tools=tools, tool_planning=True).run("order it")
        assert [done] == DONE
        reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
        assert not reply.is_error
        assert "Condition false" in reply.content and skipped in reply.content


async def test_nestful_arithmetic_on_a_reference() -> None:
    plan = {
        "steps": [
            {"id": "var1", "tool": "check_inventory", "arguments": {"sku": "pen"}},
            {
                "id": "var2",
                "tool": "purchase",
                "arguments": {"sku": "pen", "quantity": 3, "total": {"$op": "*", "args": [3, "$ref:var1.price"]}},
            },
        ]
    }
    DONE.clear()
    result = await execute_plan(plan, [check_inventory, purchase])
    assert result.status == "succeeded" and DONE == ["purchase:pen:3:7.5"]
