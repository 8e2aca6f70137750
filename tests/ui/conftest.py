"""Fixtures of the live-view tests: the gate folder, a headless Chromium page, the service."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ui_support import CHROMIUM_ARGS, ServiceThread, chromium_or_skip


@pytest.fixture
def gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of the gates (``gate`` tools wait for a file here); $UI_GATES names it."""
    directory = tmp_path / "gates"
    directory.mkdir()
    monkeypatch.setenv("UI_GATES", str(directory))
    return directory


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright's own driver."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (1280 by 720); the browser's console errors and page errors are kept in ``page.problems``."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: problems.append(str(e)))
    tab.problems = problems
    yield tab
    context.close()


@pytest.fixture
def service(tmp_path: Path, gates: Path) -> Iterator[ServiceThread]:
    s = ServiceThread(f"sqlite:///{tmp_path / 'service.db'}").start()
    yield s
    s.stop()
