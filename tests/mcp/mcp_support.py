"""Shared constants of the MCP tests (a uniquely named module; conftest holds the fixtures)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KV_SERVER = ROOT / "examples" / "mcp" / "kv_server.py"
