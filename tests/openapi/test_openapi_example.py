"""examples/openapi/pets_api.py runs and prints what it promises."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest


@pytest.mark.slow
def test_the_example_runs(run_example: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = run_example("examples/openapi/pets_api.py")
    assert "get_pet: 'Get one pet by id' read_only=True idempotent=True" in done.stdout
    assert "add_pet: 'Add a pet' read_only=False idempotent=False" in done.stdout
    assert "dogs: ['Rex', 'Fido']" in done.stdout
    assert "nobody: business - GET /pets/{pet_id} answered 404" in done.stdout
