"""The live progress view and the demo, in process (the subprocess tests never have a terminal)."""

from __future__ import annotations

import io

from rich.console import Console

from toolplan import ToolError
from toolplan.cli._demo import run_demo
from toolplan.cli._progress import ProgressView, live_progress
from toolplan.execute import PlanEvent, execute_plan


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=120, color_system=None), buffer


def add(a: int, b: int) -> int:
    return a + b


def fail(message: str) -> str:
    raise ToolError(message)


PLAN = {
    "steps": [
        {"id": "one", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "bad", "tool": "fail", "arguments": {"message": "nope"}},
        {"id": "two", "tool": "add", "arguments": {"a": "$ref:one", "b": 1}},
        {"id": "never", "tool": "add", "arguments": {"a": "$ref:bad", "b": 1}},
    ]
}


async def test_progress_view_tracks_events() -> None:
    view = ProgressView()
    seen: list[PlanEvent] = []

    def on_event(event: PlanEvent) -> None:
        seen.append(event)
        view(event)

    result = await execute_plan(PLAN, [add, fail], on_event=on_event)
    assert view.finished
    assert {sid: row.status for sid, row in view.rows.items()} == {sid: r.status for sid, r in result.steps.items()}
    assert view.rows["one"].attempts == 1
    assert view.rows["bad"].note == "nope"
    console, buffer = _console()
    console.print(view)
    text = buffer.getvalue()
    for sid in ("one", "bad", "two", "never"):
        assert sid in text
    assert "skipped" in text and "succeeded" in text and "failed" in text


async def test_live_progress_renders_on_a_terminal() -> None:
    console, buffer = _console()
    view = ProgressView({"one": "add"})
    with live_progress(console, view):
        await execute_plan(PLAN, [add, fail], on_event=view)
    text = buffer.getvalue()
    assert "never" in text and "skipped" in text


def test_run_demo_on_a_terminal() -> None:
    console, buffer = _console()
    assert run_demo(console) == 0
    text = buffer.getvalue()
    assert "Critical path: " in text
    assert "wave 3: summary" in text
    assert "achieved parallelism" in text
