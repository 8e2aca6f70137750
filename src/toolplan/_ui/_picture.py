"""Pictures of a plan for docs and bug reports: SVG (drawn here), PNG (the same drawing) and Mermaid text.

The PNG is painted with Pillow (``toolplan[png]``). With an outcome (a `PlanResult`, ``toolplan run
--json`` output or a stored run) each step is coloured by how it ended and the critical path is outlined.

The colours are the live page's (``static/live.css``: ``--state-*``); a test keeps them equal.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

from .._errors import OptionalDependencyError
from ..execute import PlanResult
from ..plan import critical_path, mermaid
from ._layout import Box, Layout, layout

__all__ = ("CRITICAL", "STATE_COLOURS", "Outcome", "PictureFormat", "outcome_from_json", "outcome_of", "render_picture")

PictureFormat = Literal["svg", "png", "mermaid"]

# State group -> (fill, line); the live page's --state-{group}-fill / --state-{group}-line.
STATE_COLOURS: Mapping[str, tuple[str, str]] = {
    "pending": ("#f1f5f9", "#94a3b8"),
    "running": ("#dbeafe", "#2563eb"),
    "succeeded": ("#dcfce7", "#16a34a"),
    "failed": ("#fee2e2", "#dc2626"),
    "cancelled": ("#ffedd5", "#ea580c"),
    "skipped": ("#ffffff", "#cbd5e1"),
}
_GROUP = {
    "timed_out": "failed",
    "unknown_outcome": "failed",
    "rejected": "failed",
    "not_run": "skipped",
    "pending_approval": "pending",
}
_LEGEND = {
    "pending": "pending",
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "skipped": "skipped / not run",
}
CRITICAL = "#7c3aed"
_PLAIN = ("#ffffff", "#64748b")  # a plan without an outcome
_INK, _MUTED, _EDGE = "#0f172a", "#64748b", "#94a3b8"
_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
_ID_CHAR, _TOOL_CHAR = 7.9, 7.3  # advance of a character of the 13 px bold and 12 px monospace fonts
_NODE_H, _CAPTION, _LEGEND_H = 46.0, 28.0, 28.0


def _group(status: str) -> str:
    return _GROUP.get(status, status if status in STATE_COLOURS else "pending")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a run of the plan went, as the pictures show it.

    Attributes:
        steps: Step id → ``(status, seconds it took or None)``.
        critical: The critical path (outlined).
        caption: A line above the drawing (run id, status, time).
    """

    steps: Mapping[str, tuple[str, float | None]]
    critical: tuple[str, ...] = ()
    caption: str = ""


def _caption(run_id: str, status: str, n: int, seconds: float | None) -> str:
    parts = [f"run {run_id}" if run_id else "run", status, f"{n} step{'s' if n != 1 else ''}"]
    if seconds is not None:
        parts.append(f"{seconds:.2f} s")
    return " · ".join(parts)


def outcome_of(result: PlanResult) -> Outcome:
    """The outcome of a `PlanResult` (a run in this process, or a stored one)."""
    steps = {sid: (r.status, r.duration) for sid, r in result.steps.items()}
    seconds = result.duration if result.ended_at else None
    caption = _caption(result.run_id, result.status, len(steps), seconds)
    return Outcome(steps=steps, critical=result.critical_path, caption=caption)


def outcome_from_json(data: Mapping[str, Any], deps: Mapping[str, Sequence[str]]) -> Outcome:
    """The outcome in ``toolplan run --json`` output (`PlanResult.to_dict`), for the plan ``deps``.

    Raises:
        ValueError: ``data`` is not such output (the message says what is missing).
    """
    rows = data.get("steps")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in rows):
        raise ValueError("it has no list of steps with ids: give the JSON that `toolplan run --json` printed.")
    steps: dict[str, tuple[str, float | None]] = {}
    for r in rows:
        start, end = r.get("started_at"), r.get("ended_at")
        timed = isinstance(start, int | float) and isinstance(end, int | float)
        steps[r["id"]] = (str(r.get("status") or "pending"), float(end) - float(start) if timed else None)
    path = data.get("critical_path")
    if not (isinstance(path, list) and all(isinstance(s, str) for s in path)):
        path = critical_path(deps, {s: d or 0.0 for s, (_, d) in steps.items()})[0]
    seconds = data.get("duration")
    caption = _caption(
        str(data.get("run_id") or ""),
        str(data.get("status") or "?"),
        len(steps),
        float(seconds) if isinstance(seconds, int | float) else None,
    )
    return Outcome(steps=steps, critical=tuple(path), caption=caption)


def render_picture(
    deps: Mapping[str, Sequence[str]],
    tools: Mapping[str, str],
    *,
    format: PictureFormat,
    outcome: Outcome | None = None,
) -> bytes:
    """The picture of the DAG ``deps`` (step → dependencies; ``tools``: step → tool) in ``format``.

    Raises:
        OptionalDependencyError: ``png`` without Pillow (``pip install "toolplan[png]"``).
    """
    if format == "mermaid":
        return _mermaid(deps, tools, outcome).encode()
    drawing = _Drawing(deps, tools, outcome)
    if format == "svg":
        return drawing.svg().encode()
    return drawing.png()


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if value < 60 else f"{value / 60:.1f} min"


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 1)] + "…"


class _Drawing:
    """The shapes of a picture, drawn once, written as SVG or painted as PNG."""

    def __init__(self, deps: Mapping[str, Sequence[str]], tools: Mapping[str, str], outcome: Outcome | None) -> None:
        self.outcome = outcome
        self.lines: dict[str, tuple[str, str]] = {}
        widths: dict[str, float] = {}
        for sid in deps:
            detail = tools.get(sid, "")
            state = outcome.steps.get(sid) if outcome is not None else None
            if state is not None and state[1] is not None:
                detail = f"{detail} · {_seconds(state[1])}"
            self.lines[sid] = (_clip(sid, 40), _clip(detail, 44))
            text_w = max(len(self.lines[sid][0]) * _ID_CHAR, len(self.lines[sid][1]) * _TOOL_CHAR)
            widths[sid] = max(96.0, round(text_w + 26))
        top = _CAPTION if outcome is not None and outcome.caption else 0.0
        self.layout: Layout = layout(deps, widths, node_h=_NODE_H, top=top)
        groups = {_group(outcome.steps.get(s, ("pending", None))[0]) for s in deps} if outcome is not None else set()
        self.legend = [g for g in STATE_COLOURS if g in groups]
        critical = outcome.critical if outcome is not None else ()
        self.critical_steps = set(critical)
        self.critical_edges = set(itertools.pairwise(critical))
        self.width = self.layout.width
        if outcome is not None:
            label, _, _, x = self._legend_items()[-1]
            self.width = max(self.width, x + 17 + len(label) * _TOOL_CHAR + 12)
            if outcome.caption:
                self.width = max(self.width, 24 + len(outcome.caption) * _TOOL_CHAR * 1.08)
        self.height = self.layout.height + (_LEGEND_H if outcome is not None else 0.0)

    def colours(self, sid: str) -> tuple[str, str, str]:
        """(fill, line, state group) of a step."""
        if self.outcome is None:
            return _PLAIN[0], _PLAIN[1], "plain"
        group = _group(self.outcome.steps.get(sid, ("pending", None))[0])
        fill, line = STATE_COLOURS[group]
        return fill, line, group

    def status(self, sid: str) -> str:
        return self.outcome.steps.get(sid, ("pending", None))[0] if self.outcome is not None else ""

    @staticmethod
    def curve(points: Sequence[tuple[float, float]]) -> list[tuple[tuple[float, float], ...]]:
        """The edge as cubic Bézier segments ``(start, control, control, end)``, level at each end."""
        out: list[tuple[tuple[float, float], ...]] = []
        for (x1, y1), (x2, y2) in itertools.pairwise(points):
            dx = (x2 - x1) / 2
            out.append(((x1, y1), (x1 + dx, y1), (x2 - dx, y2), (x2, y2)))
        return out

    # -- SVG ------------------------------------------------------------------------------------

    def svg(self) -> str:
        w, h = f"{self.width:.0f}", f"{self.height:.0f}"
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="{_FONT}">',
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
            "<defs>",
        ]
        for name, colour in (("arrow", _EDGE), ("arrow-critical", CRITICAL)):
            out.append(
                f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
                f'markerWidth="9" markerHeight="9" orient="auto">'
                f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
            )
        out.append("</defs>")
        if self.outcome is not None and self.outcome.caption:
            out.append(f'<text x="12" y="20" font-size="13" fill="{_INK}">{escape(self.outcome.caption)}</text>')
        for d, s, points in self.layout.edges:
            hot = (d, s) in self.critical_edges
            path = " ".join(
                f"M{a[0]:.1f},{a[1]:.1f} C{b[0]:.1f},{b[1]:.1f} {c[0]:.1f},{c[1]:.1f} {e[0]:.1f},{e[1]:.1f}"
                if i == 0
                else f"C{b[0]:.1f},{b[1]:.1f} {c[0]:.1f},{c[1]:.1f} {e[0]:.1f},{e[1]:.1f}"
                for i, (a, b, c, e) in enumerate(self.curve(points))
            )
            out.append(
                f'<path d="{path}" fill="none" stroke="{CRITICAL if hot else _EDGE}" '
                f'stroke-width="{3 if hot else 1.5}" marker-end="url(#{"arrow-critical" if hot else "arrow"})"/>'
            )
        for sid, box in self.layout.boxes.items():
            out.append(self._svg_node(sid, box))
        if self.outcome is not None:
            out.append(self._svg_legend())
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def _svg_node(self, sid: str, box: Box) -> str:
        fill, line, group = self.colours(sid)
        hot = sid in self.critical_steps
        dash = ' stroke-dasharray="5 3"' if group == "skipped" else ""
        title = f"{sid}: {self.status(sid)}" if self.outcome is not None else sid
        ink = _MUTED if group == "skipped" else _INK
        first, second = self.lines[sid]
        return (
            f'<g data-step={quoteattr(sid)} data-state="{escape(self.status(sid) or "plain")}">'
            f"<title>{escape(title)}</title>"
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="8" '
            f'fill="{fill}" stroke="{CRITICAL if hot else line}" stroke-width="{3 if hot else 1.5}"{dash}/>'
            f'<text x="{box.x + 12:.1f}" y="{box.y + 19:.1f}" font-size="13" font-weight="bold" fill="{ink}">'
            f"{escape(first)}</text>"
            f'<text x="{box.x + 12:.1f}" y="{box.y + 36:.1f}" font-size="12" fill="{_MUTED}">{escape(second)}</text>'
            "</g>"
        )

    def _legend_items(self) -> list[tuple[str, str, str, float]]:
        """(label, fill, line, x) of each legend entry, left to right."""
        items, x = [], 12.0
        for group in self.legend:
            fill, line = STATE_COLOURS[group]
            items.append((_LEGEND[group], fill, line, x))
            x += 28 + len(_LEGEND[group]) * _TOOL_CHAR * 0.92
        if self.critical_steps:
            items.append(("critical path", "#ffffff", CRITICAL, x))
        return items

    def _svg_legend(self) -> str:
        y = self.height - _LEGEND_H + 8
        parts = []
        for label, fill, line, x in self._legend_items():
            width = 3 if label == "critical path" else 1.5
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="12" height="12" rx="3" fill="{fill}" stroke="{line}" '
                f'stroke-width="{width}"/><text x="{x + 17:.1f}" y="{y + 10.5:.1f}" font-size="11" '
                f'fill="{_MUTED}">{escape(label)}</text>'
            )
        return "".join(parts)

    # -- PNG ------------------------------------------------------------------------------------

    def png(self, scale: float = 2.0) -> bytes:
        try:
            from PIL import Image, ImageDraw
        except ImportError as exc:
            raise OptionalDependencyError("toolplan graph --format png", "png", package="pillow") from exc

        def at(x: float, y: float) -> tuple[float, float]:
            return x * scale, y * scale

        image = Image.new("RGB", (round(self.width * scale), round(self.height * scale)), "#ffffff")
        draw = ImageDraw.Draw(image)
        bold, regular, small = _font(13 * scale, bold=True), _font(12 * scale), _font(11 * scale)
        if self.outcome is not None and self.outcome.caption:
            draw.text(at(12, 7), self.outcome.caption, fill=_INK, font=regular)
        for d, s, points in self.layout.edges:
            hot = (d, s) in self.critical_edges
            colour = CRITICAL if hot else _EDGE
            line: list[tuple[float, float]] = []
            for a, b, c, e in self.curve(points):
                for i in range(25):
                    t = i / 24
                    u = 1 - t
                    line.append(
                        at(
                            u**3 * a[0] + 3 * u * u * t * b[0] + 3 * u * t * t * c[0] + t**3 * e[0],
                            u**3 * a[1] + 3 * u * u * t * b[1] + 3 * u * t * t * c[1] + t**3 * e[1],
                        )
                    )
            end_x, end_y = points[-1]
            line[-1] = at(end_x - 6, end_y)
            draw.line(line, fill=colour, width=round((3 if hot else 1.5) * scale), joint="curve")
            draw.polygon([at(end_x - 9, end_y - 4.5), at(end_x, end_y), at(end_x - 9, end_y + 4.5)], fill=colour)
        for sid, box in self.layout.boxes.items():
            fill, outline, group = self.colours(sid)
            hot = sid in self.critical_steps
            draw.rounded_rectangle(
                (*at(box.x, box.y), *at(box.x + box.w, box.y + box.h)),
                radius=round(8 * scale),
                fill=fill,
                outline=CRITICAL if hot else outline,
                width=round((3 if hot else 1.5) * scale),
            )
            first, second = self.lines[sid]
            draw.text(at(box.x + 12, box.y + 7), first, fill=_MUTED if group == "skipped" else _INK, font=bold)
            draw.text(at(box.x + 12, box.y + 25), second, fill=_MUTED, font=regular)
        if self.outcome is not None:
            y = self.height - _LEGEND_H + 8
            for label, fill, outline, x in self._legend_items():
                width = 3 if label == "critical path" else 1.5
                draw.rounded_rectangle(
                    (*at(x, y), *at(x + 12, y + 12)),
                    radius=round(3 * scale),
                    fill=fill,
                    outline=outline,
                    width=round(width * scale),
                )
                draw.text(at(x + 17, y), label, fill=_MUTED, font=small)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
        return buffer.getvalue()


def _font(size: float, *, bold: bool = False) -> Any:
    """DejaVu Sans Mono when the system has it (Pillow finds it under the fonts folders), else Pillow's own."""
    from PIL import ImageFont

    for name in ("DejaVuSansMono-Bold.ttf",) if bold else ("DejaVuSansMono.ttf",):
        try:
            return ImageFont.truetype(name, round(size))
        except OSError:
            continue
    return ImageFont.load_default(size=round(size))


def _mermaid(deps: Mapping[str, Sequence[str]], tools: Mapping[str, str], outcome: Outcome | None) -> str:
    """Toolplan's Mermaid text (`toolplan.plan.mermaid`), plus classes for the outcome's states."""
    text = mermaid(deps, {s: f"{s}: {tools[s]}" if s in tools else s for s in deps})
    if outcome is None:
        return text
    node = {s: f"n{i}" for i, s in enumerate(deps)}
    lines = [text.rstrip("\n")]
    for group, (fill, line) in STATE_COLOURS.items():
        members = [node[s] for s in deps if _group(outcome.steps.get(s, ("pending", None))[0]) == group]
        if members:
            dash = ",stroke-dasharray:5 3" if group == "skipped" else ""
            lines.append(f"  classDef {group} fill:{fill},stroke:{line},color:{_INK}{dash}")
            lines.append(f"  class {','.join(members)} {group}")
    # The edges in the order mermaid() writes them, so linkStyle can name the critical ones.
    edges = [(d, s) for s, ds in deps.items() for d in ds if d in node]
    critical = set(itertools.pairwise(outcome.critical))
    hot = [str(i) for i, edge in enumerate(edges) if edge in critical]
    if hot:
        lines.append(f"  linkStyle {','.join(hot)} stroke:{CRITICAL},stroke-width:3px")
    return "\n".join(lines) + "\n"
