"""The service's home page (``/``: recent executions, linked to their live views) and its offline ``/docs``."""

from __future__ import annotations

import re
from typing import Any

import httpx
from ui_support import PLAN, ServiceThread


def _execution(service: ServiceThread) -> str:
    with httpx.Client(base_url=service.url, headers={"X-API-Key": service.key}, timeout=30) as c:
        plan_id = c.post("/v1/plans", json={"plan": PLAN}).json()["plan_id"]
        r = c.post(f"/v1/plans/{plan_id}/executions")
        assert r.status_code == 202, r.text
        return str(r.json()["execution_id"])


def test_the_home_page_and_docs_load_only_from_the_service(service: ServiceThread) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as anonymous:
        home = anonymous.get("/")
        assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
        assert "connect-src 'self'" in home.headers["content-security-policy"]
        assert anonymous.get("/ui/", follow_redirects=True).text == home.text
        assert anonymous.get("/ui/static/home.js").status_code == 200
        assert anonymous.get("/v1/executions").status_code == 401  # the page shows no data: its calls need a key
        docs = anonymous.get("/docs")
        assert docs.status_code == 200
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", docs.text)
        assert urls and all(u.startswith("/") for u in urls), urls  # nothing from a CDN
        for url in urls:
            assert anonymous.get(url).status_code == 200, url
        assert anonymous.get("/redoc").status_code == 404
        # GraphQL has no IDE page (GraphiQL would load from a CDN)
        page = anonymous.get("/graphql", headers={"Accept": "text/html", "X-API-Key": service.key})
        assert "unpkg" not in page.text and "cdn" not in page.text.lower() and page.status_code in (400, 404)


def test_the_home_page_lists_executions_with_the_key_and_links_their_live_views(
    page: Any, service: ServiceThread
) -> None:
    from playwright.sync_api import expect

    execution_id = _execution(service)
    # Without a key the page asks for one, and shows nothing; a wrong one is refused with the service's words.
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(service.url) else route.abort())
    page.goto(f"{service.url}/")
    expect(page.locator("#key-form")).to_be_visible()
    expect(page.locator("#views")).to_be_hidden()
    page.fill("#key-input", "tpk_not_a_key")
    page.click("#key-entry button")
    expect(page.locator("#key-message")).to_contain_text("holds no valid key")
    page.fill("#key-input", service.key)
    page.click("#key-entry button")
    link = page.locator(f"#executions a:text-is('{execution_id}')")
    expect(link).to_be_visible()
    assert link.get_attribute("href") == f"/ui/executions/{execution_id}"
    link.click()  # the live view finds the key in this tab
    expect(page.locator("#run-id")).to_have_text(execution_id)
    expect(page.locator("#key-form")).to_be_hidden()
    # The key in the fragment works too, and leaves the address bar.
    fresh = page.context.new_page()
    fresh.goto(f"{service.url}/#key={service.key}")
    expect(fresh.locator(f"#executions a:text-is('{execution_id}')")).to_be_visible()
    assert "key=" not in fresh.url
    assert [p for p in page.problems if "401" not in p] == []


def test_swagger_ui_renders_offline(page: Any, service: ServiceThread) -> None:
    from playwright.sync_api import expect

    blocked: list[str] = []

    def only_the_service(route: Any) -> None:
        if route.request.url.startswith(service.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_service)
    page.goto(f"{service.url}/docs")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    expect(page.locator(".swagger-ui")).to_contain_text("/v1/plans")
    assert blocked == []
