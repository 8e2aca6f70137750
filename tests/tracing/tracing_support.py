"""Helpers of the tracing tests (a module of its own: each test folder's conftest is named conftest)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

EVENT_KEYS = ("toolplan.step.id", "toolplan.status")


def tree(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], *, keep: tuple[str, ...] = ()) -> list[str]:
    """The spans as an indented outline: name, status, chosen attributes and events; siblings by name."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        children = sorted(
            by_parent.get(parent, []),
            key=lambda s: (s.name, str((s.attributes or {}).get("toolplan.step.id", ""))),
        )
        for span in children:
            attrs = span.attributes or {}
            shown = ", ".join(f"{k.removeprefix('toolplan.')}={attrs[k]!r}" for k in keep if k in attrs)
            status = span.status.status_code.name
            text = f"{'  ' * depth}{span.name} [{status}]"
            if shown:
                text += f" {shown}"
            lines.append(text)
            for event in span.events:
                e_attrs = event.attributes or {}
                said = ", ".join(f"{k[9:]}={e_attrs[k]!r}" for k in EVENT_KEYS if k in e_attrs)
                lines.append(f"{'  ' * (depth + 1)}event {event.name}: {said}")
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines
