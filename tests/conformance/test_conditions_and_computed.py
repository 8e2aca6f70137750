"""Conformance, conditional steps and computed arguments as clear-ai, cogent and NESTFUL users write them.

clear-ai: "if the blog was created, create a comment" (a chaining plan with ``when``); cogent: check
inventory, then purchase or back-order (two steps with opposite conditions); NESTFUL: arithmetic on
a reference (``3 * price``). Each runs from the command line (``toolplan run`` / ``validate``) as
well as from Python (the Python side is also covered by tests/agent/test_conditions_stories.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from toolplan.cli import app

TOOLS_FILE = """
from toolplan import tool


@tool
def create_blog(title: str) -> dict:
    return {"success": title != "", "blog": {"id": 41, "title": title}}


@tool
def create_comment(blog_id: int, text: str) -> dict:
    return {"id": 1, "blog_id": blog_id, "text": text}


@tool
def check_inventory(sku: str) -> dict:
    return {"sku": sku, "available": {"pen": 12}.get(sku, 0), "price": 2.5}


@tool
def purchase(sku: str, quantity: int, total: float) -> str:
    return f"order for {quantity} {sku}, {total}"


@tool
def back_order(sku: str) -> str:
    return f"back-order for {sku}"
"""


def blog_plan(title: str) -> dict[str, Any]:
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


def order_plan(sku: str, quantity: int) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "stock", "tool": "check_inventory", "arguments": {"sku": sku}},
            {
                "id": "buy",
                "tool": "purchase",
                "arguments": {
                    "sku": sku,
                    "quantity": quantity,
                    "total": {"$op": "*", "args": [quantity, "$ref:stock.price"]},  # NESTFUL's arithmetic
                },
                "when": {"$op": ">=", "args": ["$ref:stock.available", quantity]},
            },
            {
                "id": "later",
                "tool": "back_order",
                "arguments": {"sku": sku},
                "when": {"$op": "<", "args": ["$ref:stock.available", quantity]},
            },
        ]
    }


def cli(tmp_path: Path, command: str, plan: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    (tmp_path / "tools.py").write_text(TOOLS_FILE, encoding="utf-8")
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    args = [command, str(tmp_path / "plan.json"), "--tools", str(tmp_path / "tools.py"), "--json"]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    return done.exit_code, json.loads(done.stdout)


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["status"] for s in report["steps"]}


def test_clear_ai_comment_only_if_the_blog_was_created(tmp_path: Path) -> None:
    code, report = cli(tmp_path, "run", blog_plan("Hello"))
    assert code == 0 and statuses(report) == {"create_blog": "succeeded", "create_comment": "succeeded"}
    code, report = cli(tmp_path, "run", blog_plan(""))
    assert code == 0 and statuses(report) == {"create_blog": "succeeded", "create_comment": "skipped"}
    comment = next(s for s in report["steps"] if s["id"] == "create_comment")
    assert comment["error"]["message"].startswith("Condition false: {{create_blog.success}}")


def test_cogent_purchase_or_back_order_with_a_computed_total(tmp_path: Path) -> None:
    code, report = cli(tmp_path, "run", order_plan("pen", 4))
    assert code == 0 and statuses(report) == {"stock": "succeeded", "buy": "succeeded", "later": "skipped"}
    buy = next(s for s in report["steps"] if s["id"] == "buy")
    assert buy["output"] == "order for 4 pen, 10.0"
    code, report = cli(tmp_path, "run", order_plan("ink", 1))
    assert code == 0 and statuses(report) == {"stock": "succeeded", "buy": "skipped", "later": "succeeded"}


def test_a_bad_condition_or_computed_argument_is_refused_before_any_tool_runs(tmp_path: Path) -> None:
    plan = order_plan("pen", 4)
    plan["steps"][1]["when"] = {"$op": ">=", "args": ["$ref:nowhere.available", 4]}
    plan["steps"][1]["arguments"]["total"] = {"$op": "*", "args": ["four", "$ref:stock.price"]}
    for command in ("validate", "run"):
        code, report = cli(tmp_path, command, plan)
        assert code == 2 and report["status"] == "invalid" and "steps" not in report
        assert sorted(e["code"] for e in report["errors"]) == ["invalid_expression", "unknown_reference"]
