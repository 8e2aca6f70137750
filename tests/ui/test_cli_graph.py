"""``toolplan graph --format svg|png|mermaid`` and the ``--ui`` options of ``toolplan run``."""

from __future__ import annotations

import asyncio
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from ui_support import HERE

from toolplan import execute_plan
from toolplan.cli import app
from toolplan.store import open_store

runner = CliRunner()
PLAN = {
    "steps": [
        {"id": "a", "tool": "combine", "arguments": {"parts": [1]}},
        {"id": "b", "tool": "gate_fail", "arguments": {"name": "open", "message": "no luck"}},
        {"id": "c", "tool": "combine", "arguments": {"parts": ["$ref:a", "$ref:b"]}},
    ]
}
TOOLS = str(HERE / "ui_tools.py")


def toolplan(*args: str) -> Any:
    return runner.invoke(app, list(args), prog_name="toolplan")


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN), encoding="utf-8")
    return path


def states(svg: bytes) -> dict[str, str]:
    root = ET.fromstring(svg)
    return {g.attrib["data-step"]: g.attrib["data-state"] for g in root.iter() if "data-step" in g.attrib}


async def _run(gates: Path, **options: Any) -> Any:
    from ui_tools import TOOLS as tools

    (gates / "open").touch()
    return await execute_plan(PLAN, tools, **options)


def test_the_format_follows_the_file_name_and_mermaid_stays_the_default(plan: Path, tmp_path: Path) -> None:
    r = toolplan("graph", str(plan))
    assert r.exit_code == 0 and r.stdout.startswith("flowchart TD")
    r = toolplan("graph", str(plan), "-o", str(tmp_path / "g.svg"))
    assert r.exit_code == 0, r.output
    assert states((tmp_path / "g.svg").read_bytes()) == {"a": "plain", "b": "plain", "c": "plain"}
    r = toolplan("graph", str(plan), "-o", str(tmp_path / "g.png"))
    assert r.exit_code == 0 and (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    r = toolplan("graph", str(plan), "--format", "svg")  # to standard output
    assert r.exit_code == 0 and r.stdout.startswith("<svg ")
    r = toolplan("graph", str(plan), "-f", "mermaid", "-o", str(tmp_path / "g.mmd"))
    assert (tmp_path / "g.mmd").read_text(encoding="utf-8").startswith("flowchart TD")


def test_a_run_result_colours_the_picture(plan: Path, tmp_path: Path, gates: Path) -> None:
    result = asyncio.run(_run(gates))
    (tmp_path / "result.json").write_text(json.dumps(result.to_dict()), encoding="utf-8")
    r = toolplan("graph", str(plan), "--result", str(tmp_path / "result.json"), "-o", str(tmp_path / "r.svg"))
    assert r.exit_code == 0, r.output
    assert states((tmp_path / "r.svg").read_bytes()) == {"a": "succeeded", "b": "failed", "c": "skipped"}
    r = toolplan("graph", str(plan), "--result", str(tmp_path / "result.json"), "--format", "png")
    from PIL import Image

    assert r.exit_code == 0 and Image.open(io.BytesIO(r.stdout_bytes)).format == "PNG"


def test_a_stored_run_is_drawn_from_the_store(tmp_path: Path, gates: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def stored() -> None:
        async with open_store(url) as store:
            await _run(gates, store=store, run_id="r1")

    asyncio.run(stored())
    r = toolplan("graph", "--db", url, "--run-id", "r1", "-o", str(tmp_path / "s.svg"))
    assert r.exit_code == 0, r.output
    svg = (tmp_path / "s.svg").read_bytes()
    assert states(svg) == {"a": "succeeded", "b": "failed", "c": "skipped"}
    assert b"run r1 \xc2\xb7 failed \xc2\xb7 3 steps" in svg
    r = toolplan("graph", "--db", url, "--run-id", "r1", "-f", "mermaid")
    assert "  class n1 failed\n" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["graph"], "graph needs a plan: pass PLAN.json (or --db URL --run-id ID"),
        (["graph", "--run-id", "r1"], "--run-id needs the store it is in: pass --db URL"),
        (["graph", "{plan}", "--run-id", "r1", "--db", "sqlite:///x.db"], "leave out PLAN.json and --result"),
        (["graph", "--run-id", "nope", "--db", "sqlite:///{tmp}/empty.db"], "No run 'nope' is stored here"),
        (["graph", "{plan}", "--result", "{tmp}/missing.json"], "does not exist: give the JSON file"),
        (["graph", "{plan}", "--result", "{tmp}/other.json"], "has steps the plan does not (zzz)"),
        (["graph", "{plan}", "--result", "{tmp}/list.json"], "is not a run's result"),
        (["graph", "{plan}", "-o", "{tmp}/no/such/dir/g.svg"], "Check the folder exists"),
        (["run", "{plan}", "--tools", TOOLS, "--ui-port", "8000"], "--ui-port and --ui-keep go with --ui"),
        (["run", "{plan}", "--tools", TOOLS, "--ui", "--ui-keep", "-1"], "--ui-keep must be 0 or more seconds"),
        (["run", "{plan}", "--tools", TOOLS, "--ui", "--ui-port", "70000"], "--ui-port must be a port number"),
    ],
)
def test_mistakes_are_one_line_that_says_what_to_do(plan: Path, tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"steps": [{"id": "zzz", "status": "failed"}]}), encoding="utf-8")
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    (tmp_path / "empty.db").write_bytes(b"")  # an empty SQLite database (a reading command makes none)
    r = toolplan(*(a.replace("{plan}", str(plan)).replace("{tmp}", str(tmp_path)) for a in args))
    assert r.exit_code == 2, r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_a_busy_ui_port_is_one_line(plan: Path, gates: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = toolplan("run", str(plan), "--tools", TOOLS, "--ui", "--ui-port", str(port))
    assert r.exit_code == 2
    assert f"Cannot serve the live view on 127.0.0.1:{port}" in r.stderr and "pick another --ui-port" in r.stderr
