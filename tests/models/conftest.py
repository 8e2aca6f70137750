from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolplan.testing import FakeProvider, disable_retry_backoff


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture(autouse=True)
def no_backoff() -> Iterator[None]:
    """Retries happen at once (stamina's test mode), with each model's own number of attempts."""
    with disable_retry_backoff():
        yield


@pytest.fixture
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The waits that retries ask for, recorded instead of slept (stamina's real backoff, no wall time).

    stamina's test mode is switched off so the waits toolplan computes reach the sleep; the sleep
    itself is replaced by one that records its delay and returns at once.
    """
    import asyncio

    import stamina

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float, result: object = None) -> object:
        if delay > 0:
            waits.append(delay)
        return await real_sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", record)
    with stamina.set_testing(False):
        yield waits
