"""The pictures of ``toolplan graph`` (SVG, PNG, Mermaid) and their layout."""

from __future__ import annotations

import io
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ui_support import REPO

from toolplan import OptionalDependencyError, ToolError, execute_plan_sync
from toolplan._ui._layout import layout
from toolplan._ui._picture import (
    CRITICAL,
    STATE_COLOURS,
    Outcome,
    _Drawing,
    outcome_from_json,
    outcome_of,
    render_picture,
)
from toolplan.plan import validate_plan

SVG = "{http://www.w3.org/2000/svg}"
DEPS: dict[str, tuple[str, ...]] = {
    "tokyo": (),
    "london": (),
    "paris": (),
    "tokyo_vs_london": ("tokyo", "london"),
    "paris_vs_london": ("paris", "london"),
    "summary": ("tokyo_vs_london", "paris_vs_london"),
    "late": ("tokyo",),  # skips a column: its edge bends around
}
TOOLS = {s: "get_weather" if "_" not in s else "compare_data" for s in DEPS} | {"summary": "summarise"}
OUTCOME = Outcome(
    steps={
        "tokyo": ("succeeded", 0.41),
        "london": ("succeeded", 1.25),
        "paris": ("failed", 0.2),
        "tokyo_vs_london": ("succeeded", 0.002),
        "paris_vs_london": ("skipped", None),
        "summary": ("skipped", None),
        "late": ("timed_out", 5.0),
    },
    critical=("tokyo", "late"),
    caption="run r1 · failed · 7 steps · 5.41 s",
)


def nodes(svg: bytes) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.attrib["data-step"]: g for g in root.iter(f"{SVG}g") if "data-step" in g.attrib}


def test_the_svg_shows_every_step_and_dependency_and_is_the_same_every_time() -> None:
    svg = render_picture(DEPS, TOOLS, format="svg")
    assert svg == render_picture(DEPS, TOOLS, format="svg")
    found = nodes(svg)
    assert set(found) == set(DEPS)
    texts = {s: [t.text for t in g.iter(f"{SVG}text")] for s, g in found.items()}
    assert texts["summary"] == ["summary", "summarise"]
    edges = [p for p in ET.fromstring(svg).iter(f"{SVG}path") if p.attrib.get("marker-end")]
    assert len(edges) == sum(len(d) for d in DEPS.values())


def test_with_an_outcome_steps_are_coloured_by_state_and_the_critical_path_outlined() -> None:
    svg = render_picture(DEPS, TOOLS, format="svg", outcome=OUTCOME)
    found = nodes(svg)
    group = {"timed_out": "failed", "skipped": "skipped"}
    for sid, (status, _) in OUTCOME.steps.items():
        rect = found[sid].find(f"{SVG}rect")
        assert rect is not None and found[sid].attrib["data-state"] == status
        assert rect.attrib["fill"] == STATE_COLOURS[group.get(status, status)][0], sid
        hot = sid in OUTCOME.critical
        assert (rect.attrib["stroke"] == CRITICAL) == hot, sid
    assert [t.text for t in found["london"].iter(f"{SVG}text")] == ["london", "get_weather · 1.25 s"]
    assert [t.text for t in found["tokyo_vs_london"].iter(f"{SVG}text")][1] == "compare_data · 2 ms"
    text = svg.decode()
    assert "run r1 · failed · 7 steps · 5.41 s" in text
    for label in ("succeeded", "failed", "skipped / not run", "critical path"):
        assert f">{label}</text>" in text
    assert ">cancelled</text>" not in text  # only the states the run has


def test_the_png_is_the_same_drawing_painted() -> None:
    from PIL import Image

    drawing = _Drawing(DEPS, TOOLS, OUTCOME)
    image = Image.open(io.BytesIO(render_picture(DEPS, TOOLS, format="png", outcome=OUTCOME)))
    assert image.format == "PNG" and image.size == (round(drawing.width * 2), round(drawing.height * 2))
    rgb = image.convert("RGB")
    for sid, box in drawing.layout.boxes.items():
        inside = rgb.getpixel((round((box.x + box.w - 8) * 2), round((box.y + box.h - 8) * 2)))
        fill = drawing.colours(sid)[0]
        assert inside == tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5)), sid


def test_a_png_without_pillow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(OptionalDependencyError, match=re.escape('pip install "toolplan[png]"')):
        render_picture(DEPS, TOOLS, format="png")
    assert render_picture(DEPS, TOOLS, format="svg").startswith(b"<svg ")  # SVG needs nothing


def test_mermaid_is_the_plan_graph_text_plus_classes_for_the_outcome() -> None:
    compiled = validate_plan(
        {"steps": [{"id": "a", "tool": "t"}, {"id": "b", "tool": "t", "depends_on": ["a"]}]}
    ).compiled
    assert compiled is not None
    tools = {"a": "t", "b": "t"}
    plain = render_picture(compiled.deps, tools, format="mermaid").decode()
    assert plain == compiled.mermaid()
    outcome = Outcome(steps={"a": ("succeeded", 1.0), "b": ("failed", 0.5)}, critical=("a", "b"))
    text = render_picture(compiled.deps, tools, format="mermaid", outcome=outcome).decode()
    assert text.startswith(plain.rstrip("\n"))
    assert "  class n0 succeeded\n" in text and "  class n1 failed\n" in text
    assert f"  linkStyle 0 stroke:{CRITICAL},stroke-width:3px\n" in text


def test_outcomes_from_a_result_and_from_its_json_agree() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "b", "tool": "half", "arguments": {"a": "$ref:a"}},
            {"id": "c", "tool": "add", "arguments": {"a": "$ref:b", "b": 1}},
        ]
    }

    def add(a: int, b: int) -> int:
        return a + b

    def half(a: int) -> int:
        if a % 2:
            raise ToolError(f"{a} is odd")
        return a // 2

    result = execute_plan_sync(plan, [add, half])
    direct, from_json = outcome_of(result), outcome_from_json(result.to_dict(), result.deps)
    assert direct == from_json
    assert {s: st for s, (st, _) in direct.steps.items()} == {"a": "succeeded", "b": "failed", "c": "skipped"}
    assert direct.caption.startswith(f"run {result.run_id} · failed · 3 steps · ")


def test_the_palette_is_the_live_pages() -> None:
    css = (REPO / "src" / "toolplan" / "_ui" / "static" / "live.css").read_text(encoding="utf-8")
    found = dict(re.findall(r"--state-([a-z]+-(?:fill|line)):\s*(#[0-9a-f]{6});", css))
    expected = {
        f"{g}-{part}": c for g, pair in STATE_COLOURS.items() for part, c in zip(("fill", "line"), pair, strict=True)
    }
    assert found == expected
    assert f"--critical: {CRITICAL};" in css


@st.composite
def dags(draw: st.DrawFn) -> dict[str, tuple[str, ...]]:
    n = draw(st.integers(1, 14))
    ids = [f"s{i}" for i in range(n)]
    return {s: tuple(draw(st.sets(st.sampled_from(ids[:i]), max_size=3))) if i else () for i, s in enumerate(ids)}


@settings(max_examples=60, deadline=None)
@given(dags(), st.integers(60, 200))
def test_the_layout_never_overlaps_and_flows_left_to_right(deps: Mapping[str, Sequence[str]], width: int) -> None:
    drawn = layout(deps, dict.fromkeys(deps, float(width)))
    boxes = drawn.boxes
    assert set(boxes) == set(deps)
    items = list(boxes.items())
    for i, (a, p) in enumerate(items):
        assert p.x >= 0 and p.x + p.w <= drawn.width and p.y >= 0 and p.y + p.h <= drawn.height, a
        for b, q in items[i + 1 :]:
            apart = p.x + p.w <= q.x or q.x + q.w <= p.x or p.y + p.h <= q.y or q.y + q.h <= p.y
            assert apart, (a, b)
    for d, s, points in drawn.edges:
        assert boxes[d].x + boxes[d].w <= boxes[s].x, (d, s)
        assert points[0] == boxes[d].right and points[-1] == boxes[s].left
        assert [x for x, _ in points] == sorted(x for x, _ in points)
    assert len(drawn.edges) == sum(len(set(v)) for v in deps.values())


def test_a_fan_out_is_drawn_without_crossings() -> None:
    deps = {"root": (), **{f"leaf{i}": ("root",) for i in range(5)}, "join": tuple(f"leaf{i}" for i in range(5))}
    drawn = layout(deps, dict.fromkeys(deps, 100.0))
    ys = [drawn.boxes[f"leaf{i}"].y for i in range(5)]
    assert ys == sorted(ys)  # plan order kept top to bottom
    centre = drawn.boxes["root"].y
    assert min(ys) < centre < max(ys)  # the root sits among its dependents


@pytest.mark.slow
def test_the_docs_picture_is_toolplans_drawing_of_its_plan(tmp_path: Path) -> None:
    from docs_pictures import DOCS_PLAN, docs_graph_svg

    picture = REPO / "docs" / "plan-graph.svg"
    fresh = docs_graph_svg(tmp_path)
    assert set(nodes(fresh)) == {s["id"] for s in DOCS_PLAN["steps"]}
    committed = nodes(picture.read_bytes())
    assert {s: g.attrib["data-state"] for s, g in committed.items()} == {
        s: g.attrib["data-state"] for s, g in nodes(fresh).items()
    }
