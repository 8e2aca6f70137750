"""The backend conformance suite with the in-process backend (the reference the Ray run must match)."""

from __future__ import annotations

import pytest
from conformance_cases import *  # noqa: F403  # the shared cases

from toolplan.execute import Backend, InProcessBackend


@pytest.fixture(params=["default", "in_process"])
def backend(request: pytest.FixtureRequest) -> Backend | None:
    """None (the inlined default) and the explicit `InProcessBackend`: both must behave alike."""
    return None if request.param == "default" else InProcessBackend()
