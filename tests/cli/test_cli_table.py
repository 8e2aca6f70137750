"""The step tables at several widths and heights, on a terminal and piped (issue 15, items 11 and 12)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import REPO, Cli, WritePlan
from rich.console import Console

from toolplan import ToolError
from toolplan.cli._progress import ProgressView
from toolplan.cli._render import step_table
from toolplan.execute import PlanEvent, PlanResult, execute_plan

LONG = "x" * 100  # an output wider than 80 columns


def add(a: int, b: int) -> int:
    return a + b


def long_text(n: int) -> str:
    return f"{n}:{LONG}"


def fail(message: str) -> str:
    raise ToolError(message)


def huge() -> str:
    return "y" * 100_000


PLAN: dict[str, Any] = {
    "steps": [
        {"id": "first_report", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "long", "tool": "long_text", "arguments": {"n": 7}},
        {"id": "bad", "tool": "fail", "arguments": {"message": "the city was not found"}},
        {"id": "after", "tool": "add", "arguments": {"a": "$ref:first_report", "b": 1}},
        {"id": "never", "tool": "add", "arguments": {"a": "$ref:bad", "b": 1}},
    ]
}
TOOLS: list[Callable[..., Any]] = [add, long_text, fail]


def _console(width: int, height: int = 50, *, terminal: bool = True) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, height=height, force_terminal=terminal, color_system=None)
    return console, buffer


def _lines(buffer: io.StringIO) -> list[str]:
    return buffer.getvalue().splitlines()


def _header(lines: list[str]) -> list[str]:
    """The column headers of a table (its first line)."""
    return [cell.strip() for cell in re.split(r"[┃│]", lines[0])]


@pytest.fixture(scope="module")
def result() -> PlanResult:
    return asyncio.run(execute_plan(PLAN, TOOLS))


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_step_table_fits_the_width_with_whole_headers(result: PlanResult, width: int) -> None:
    console, buffer = _console(width)
    console.print(step_table(result, width=width))
    lines = _lines(buffer)
    assert max(len(line) for line in lines) <= width
    header = _header(lines)
    assert {"step", "status", "time"} <= set(header)
    assert "attempts" in header or "tries" in header
    assert all(header), f"a column without a header: {header}"
    assert all("…" not in cell for cell in header), f"a cut header: {header}"
    times = [line for line in lines[2:] if re.search(r"\d\.\d\ds", line)]
    assert len(times) == 4  # every step that ran shows its time; the skipped one has none


@pytest.mark.parametrize("width", [80, 120, 200])
def test_at_80_columns_and_more_only_the_output_column_gives_way(result: PlanResult, width: int) -> None:
    console, buffer = _console(width)
    console.print(step_table(result, width=width))
    lines = _lines(buffer)
    assert _header(lines) == ["step", "tool", "status", "attempts", "time", "output / error"]
    row = next(line for line in lines if line.startswith("first_report "))
    assert re.search(r"first_report\s+│ add\s+│ succeeded │\s+1 │\s+\d\.\d\ds │ 3", row)
    long_row = next(line for line in lines if line.startswith("long "))
    if width < 200:
        assert long_row.rstrip().endswith("…")
    else:
        assert LONG in long_row


def test_piped_output_is_not_cut_at_80_columns(result: PlanResult) -> None:
    from toolplan.cli._render import print_step_table

    console, buffer = _console(80, terminal=False)
    print_step_table(console, result)
    text = buffer.getvalue()
    assert f"7:{LONG}" in text
    assert "the city was not found" in text
    assert all(line == line.rstrip() for line in text.splitlines())  # no padding to the widest value


def test_hostile_output_is_bounded_even_when_piped() -> None:
    from toolplan.cli._render import print_step_table

    result = asyncio.run(execute_plan({"steps": [{"id": "s", "tool": "huge", "arguments": {}}]}, [huge]))
    console, buffer = _console(80, terminal=False)
    print_step_table(console, result)
    assert max(len(line) for line in _lines(buffer)) < 400


@pytest.mark.parametrize("width", [40, 80, 120, 200])
async def test_live_view_fits_the_width_and_pending_steps_show_their_tool(width: int) -> None:
    view = ProgressView({str(s["id"]): str(s["tool"]) for s in PLAN["steps"]})
    console, buffer = _console(width)
    console.print(view)
    lines = _lines(buffer)
    assert max(len(line) for line in lines) <= width
    assert all(re.search(r"│ pending", line) for line in lines[2:])
    if width >= 80:
        assert re.search(r"^after\s+│ add\s+│ pending", lines[5])
    await execute_plan(PLAN, TOOLS, on_event=view)
    console, buffer = _console(width)
    console.print(view)
    lines = _lines(buffer)
    assert max(len(line) for line in lines) <= width
    header = _header(lines)
    assert "time" in header and ("attempts" in header or "tries" in header)


WIDE: dict[str, Any] = {
    "steps": [
        *({"id": f"ok{i:02d}", "tool": "add", "arguments": {"a": i, "b": 1}} for i in range(17)),
        {"id": "bad", "tool": "fail", "arguments": {"message": "nope"}},
        *({"id": f"slow{i}", "tool": "wait", "arguments": {}} for i in range(3)),
        *({"id": f"later{i:02d}", "tool": "add", "arguments": {"a": "$ref:slow0", "b": i}} for i in range(19)),
    ]
}


@pytest.mark.parametrize(("width", "height"), [(80, 12), (120, 20), (40, 8)])
async def test_a_plan_taller_than_the_terminal_shows_a_counter_and_the_running_steps(width: int, height: int) -> None:
    release = asyncio.Event()
    started = asyncio.Event()
    waiting = 0

    async def wait() -> str:
        nonlocal waiting
        waiting += 1
        if waiting == 3:
            started.set()
        await release.wait()
        return "done"

    view = ProgressView({str(s["id"]): str(s["tool"]) for s in WIDE["steps"]})
    ready = asyncio.Event()

    def on_event(event: PlanEvent) -> None:
        view(event)
        done = sum(1 for row in view.rows.values() if row.status in ("succeeded", "failed"))
        if started.is_set() and done == 18:
            ready.set()

    task = asyncio.create_task(execute_plan(WIDE, [add, fail, wait], on_event=on_event))
    await started.wait()
    await ready.wait()
    console, buffer = _console(width, height)
    console.print(view)
    lines = _lines(buffer)
    assert len(lines) < height
    assert lines[0] == "18/40 done, 3 running, 1 failed"
    shown = "\n".join(lines)
    for sid in ("slow0", "slow1", "slow2"):
        assert re.search(rf"^{sid}\s.*running", shown, flags=re.M), shown
    release.set()
    result = await task
    assert result.status == "succeeded" or result.status == "failed"
    console, buffer = _console(width, height)
    console.print(view)
    final = buffer.getvalue()
    assert "done," not in final  # once finished, the whole table: every step has its row
    for sid in WIDE["steps"]:
        assert re.search(rf"^{sid['id']}\s", final, flags=re.M)


def test_counter_names_every_kind_of_end() -> None:
    view = ProgressView({"a": "t", "b": "t", "c": "t", "d": "t"})
    view.rows["a"].status = "succeeded"
    view.rows["b"].status = "timed_out"
    view.rows["c"].status = "skipped"
    view.rows["d"].status = "running"
    assert view.counter() == "3/4 done, 1 running, 1 failed, 1 skipped"


@pytest.mark.parametrize("width", [80, 120])
def test_the_demo_table_keeps_every_column_and_header_at_80_columns(width: int) -> None:
    from toolplan.cli._demo import DEMO_PLAN, demo_tools

    demo = asyncio.run(execute_plan(DEMO_PLAN, demo_tools()))
    console, buffer = _console(width)
    console.print(step_table(demo, width=width))
    lines = _lines(buffer)
    assert max(len(line) for line in lines) <= width
    assert _header(lines) == ["step", "tool", "status", "attempts", "time", "output / error"]
    assert re.search(r"^paris_vs_new_york\s+│ compare_data │ succeeded │\s+1 │\s+\d\.\d\ds │ ", "\n".join(lines), re.M)


def test_toolplan_run_piped_is_not_cut_at_80_columns(cli: Cli, tools_file: Path, write_plan: WritePlan) -> None:
    value = "word " * 30
    plan = write_plan([{"id": "say_something_long", "tool": "echo", "arguments": {"value": value}}])
    r = cli("run", str(plan), "--tools", str(tools_file))
    assert r.code == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("say_something_long "))
    assert value.strip() in row


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_toolplan_run_on_a_terminal_shows_pending_steps_with_their_tool(
    tools_file: Path, write_plan: WritePlan
) -> None:
    import pty

    plan = write_plan(
        [
            {"id": "first", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "second", "tool": "add", "arguments": {"a": "$ref:first", "b": 1}},
        ]
    )
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "100", "LINES": "30", "TERM": "xterm"}
    env.pop("FORCE_COLOR", None)
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolplan", "run", str(plan), "--tools", str(tools_file)],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=tools_file.parent,
        env=env,
    )
    os.close(child)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert proc.wait(timeout=60) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    # the first frame comes before any step starts: every step is pending, with its tool
    assert re.search(r"second\s+│ add\s+│ pending", text), text
    assert re.search(r"second\s+│ add\s+│ succeeded", text), text
