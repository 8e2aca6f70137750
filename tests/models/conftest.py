from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, fake_provider

from toolplan.testing import disable_retry_backoff


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with fake_provider() as server:
        yield server


@pytest.fixture(autouse=True)
def no_backoff() -> Iterator[None]:
    """Retries happen at once (stamina's test mode), with each model's own number of attempts."""
    with disable_retry_backoff():
        yield
