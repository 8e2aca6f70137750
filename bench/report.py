"""Render ``RESULTS.md`` from the results JSON files (placeholder until every section exists)."""

from __future__ import annotations

from pathlib import Path


def write_report(out_dir: Path) -> Path:
    path = out_dir / "RESULTS.md"
    path.write_text("# results\n")
    return path
