"""The live page in a real browser (Debian's Chromium, headless, driven by Playwright): the page of
``toolplan run --ui`` and the service's ``/ui/executions/{id}`` follow a run as its steps finish.

The steps wait on gates the test opens, so each state is seen for certain, without sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from ui_support import PLAN, ServiceThread, keep_screenshot, live_run

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _patient_expect() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a bound for a slow machine, not a timing being tested


def node(page: Any, step: str) -> Any:
    return page.locator(f'#graph g.node[data-step="{step}"]')


def row(page: Any, step: str) -> Any:
    return page.locator(f'#steps tr[data-step="{step}"]')


def states(page: Any, expected: dict[str, str]) -> None:
    """Each step shows the state, in the graph and in the table."""
    from playwright.sync_api import expect

    for step, state in expected.items():
        expect(node(page, step)).to_have_attribute("data-state", state)
        expect(row(page, step)).to_have_attribute("data-state", state)


def follow_the_plan(page: Any, gates: Path, name: str) -> None:
    """Open the gates one by one and watch the page change with each."""
    from playwright.sync_api import expect

    states(page, {"search_web": "running", "search_docs": "running", "fetch_prices": "running"})
    states(page, {"summarise": "pending", "compare": "pending", "report": "pending"})
    expect(page.locator("body")).to_have_attribute("data-status", "running")

    (gates / "docs").touch()
    states(page, {"search_docs": "succeeded"})
    states(page, {"search_web": "running", "summarise": "pending"})  # still waiting for the web search
    expect(row(page, "search_docs").locator("td.result")).to_contain_text('"gate":"docs"')
    keep_screenshot(page, f"{name}-running.png")

    (gates / "web").touch()
    states(page, {"search_web": "succeeded", "summarise": "succeeded", "report": "succeeded"})
    states(page, {"fetch_prices": "running", "compare": "pending"})
    expect(row(page, "summarise").locator("td.result")).to_contain_text('"parts":2')

    (gates / "prices").touch()
    states(page, {"fetch_prices": "failed", "compare": "skipped"})
    expect(row(page, "fetch_prices").locator("td.result .error")).to_contain_text(
        "business: The price API answered 503: try again in a minute."
    )
    expect(row(page, "compare").locator("td.result")).to_contain_text("Skipped because dependency 'fetch_prices'")
    expect(page.locator("body")).to_have_attribute("data-status", "failed")
    expect(page.locator("#status")).to_have_text("failed")
    # The critical path is outlined (a chain that ends at a step that ran), and the timeline has a
    # bar for each step that ran (skipped steps never ran).
    expect(page.locator("#graph g.node.critical").first).to_be_visible()
    expect(page.locator("#waterfall rect.bar")).to_have_count(5)
    expect(page.locator("#connection")).to_have_text("the run has ended")


def test_the_page_of_toolplan_run_follows_the_run(page: Any, gates: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN), encoding="utf-8")
    with live_run(plan, gates, "--ui-keep", "600") as run:
        assert "#key=" in run.url
        page.goto(run.url)
        assert "#key=" not in page.url  # the key leaves the address bar (it stays in the tab's storage)
        follow_the_plan(page, gates, "live-view")
        keep_screenshot(page, "live-view.png", docs=True)  # the README's picture
        page.reload()  # a page opened after the end shows the whole run
        states(page, {"search_web": "succeeded", "fetch_prices": "failed", "compare": "skipped"})
        run.wait_for("The run has ended; its live view stays at")
        code, out, err = run.interrupt()
    assert code == 1, err  # the run's exit code (a step failed), not Ctrl-C's
    assert "fetch_prices" in out and "The price API answered 503" in out
    assert "Stopped the live view." in err and "Traceback" not in err
    assert page.problems == []


def test_the_service_page_follows_an_execution(page: Any, service: ServiceThread, gates: Path) -> None:
    from playwright.sync_api import expect

    with httpx.Client(base_url=service.url, headers={"X-API-Key": service.key}, timeout=30) as c:
        r = c.post("/v1/plans", json={"plan": PLAN})
        assert r.status_code == 201, r.text
        r = c.post(f"/v1/plans/{r.json()['plan_id']}/executions")
        assert r.status_code == 202, r.text
        execution_id = r.json()["execution_id"]

    # Without a key in the address the page asks for one; a wrong one is refused with the service's words.
    page.goto(f"{service.url}/ui/executions/{execution_id}")
    expect(page.locator("#key-form")).to_be_visible()
    page.fill("#key-input", "tpk_not_a_key")
    page.click("#key-entry button")
    expect(page.locator("#key-message")).to_contain_text("holds no valid key")
    expect(page.locator("#key-message code")).to_have_text("toolplan keys list")  # code, not `backticks`
    expect(page.locator("#key-message")).not_to_contain_text("`")
    page.fill("#key-input", service.key)
    page.click("#key-entry button")
    expect(page.locator("#key-form")).to_be_hidden()
    expect(page.locator("#run-id")).to_have_text(execution_id)

    follow_the_plan(page, gates, "live-view-service")
    keep_screenshot(page, "live-view-service.png")
    # Opened later with the key in the fragment, the page shows the finished execution at once.
    fresh = page.context.new_page()
    fresh.goto(f"{service.url}/ui/executions/{execution_id}#key={service.key}")
    states(fresh, {"search_docs": "succeeded", "fetch_prices": "failed", "compare": "skipped"})
    expect(fresh.locator("#waterfall rect.bar")).to_have_count(5)
    # The browser logged one error: the wrong key's 401.
    assert [p for p in page.problems if "401" not in p] == []


APPROVAL_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "look", "tool": "combine", "arguments": {"parts": [1]}},
        {"id": "write", "tool": "combine", "arguments": {"parts": ["$ref:look", 2]}},
        {"id": "after", "tool": "combine", "arguments": {"parts": ["$ref:write"]}},
        {"id": "other", "tool": "combine", "arguments": {"parts": ["$ref:look", 3]}},
    ]
}


def test_the_service_page_approves_and_rejects_waiting_steps(page: Any, service: ServiceThread, gates: Path) -> None:
    from playwright.sync_api import expect

    with httpx.Client(base_url=service.url, headers={"X-API-Key": service.key}, timeout=30) as c:
        plan_id = c.post("/v1/plans", json={"plan": APPROVAL_PLAN}).json()["plan_id"]
        rule = {"approval": {"every": True}}
        r = c.post(f"/v1/plans/{plan_id}/executions", params={"wait": 20}, json=rule)
        assert r.status_code == 200 and r.json()["status"] == "pending_approval", r.text
        execution_id = r.json()["execution_id"]

    page.goto(f"{service.url}/ui/executions/{execution_id}#key={service.key}")
    states(page, {"look": "pending_approval", "write": "pending", "other": "pending"})
    expect(row(page, "look").locator(".approval .note").first).to_contain_text('"parts":[1]')
    # The steps that will need approval once their inputs are computed can be answered now too.
    ahead = row(page, "write").locator(".approval .note").first
    expect(ahead).to_contain_text("will need approval once its inputs are computed")
    expect(ahead).to_contain_text("$ref:look")
    row(page, "look").locator("button.approve").click()
    states(page, {"look": "succeeded", "write": "pending_approval", "other": "pending_approval"})
    expect(row(page, "write").locator(".approval")).to_contain_text("then: after")
    row(page, "write").locator("input.reason").fill("not this one")
    row(page, "write").locator("button.reject").click()
    states(page, {"write": "rejected", "after": "skipped", "other": "pending_approval"})
    expect(row(page, "write").locator("td.result")).to_contain_text("not this one")
    row(page, "other").locator("button.approve").click()
    states(page, {"other": "succeeded"})
    expect(page.locator("body")).to_have_attribute("data-status", "failed")
    expect(page.locator("#connection")).to_have_text("the run has ended")
    keep_screenshot(page, "live-view-approval.png")
    assert page.problems == []
