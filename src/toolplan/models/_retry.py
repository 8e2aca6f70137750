"""Retrying model requests with stamina, and the errors the adapters raise.

Only transient failures are retried: HTTP 408/409/425/429 and 5xx, timeouts, connection errors.
A stream is retried only until its first event: once something was yielded, a failure propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from .._errors import ModelAuthError, ModelConnectionError, ModelHTTPError, UnexpectedModelBehavior
from ._settings import RetryConfig

__all__ = ("connection_error", "error_detail", "is_transient", "retry_call", "retry_stream", "status_error")

T = TypeVar("T")
E = TypeVar("E")

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


def is_transient(exc: BaseException) -> bool:
    """True for failures worth another try: rate limits, server errors, timeouts, lost connections."""
    if isinstance(exc, ModelAuthError):
        return False
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
    return isinstance(exc, ModelConnectionError)


def status_error(provider: str, model: str, status: int, detail: str) -> ModelHTTPError:
    """The error for an HTTP error answer (or an error event in a stream)."""
    detail = detail.strip() or "no details"
    if len(detail) > 500:
        detail = f"{detail[:500]}... ({len(detail)} characters)"
    if status in (401, 403):
        return ModelAuthError(
            f"{provider} rejected the credentials for model {model!r} (HTTP {status}: {detail}). "
            "Check the API key and that it may use this model; toolplan does not retry this.",
            status_code=status,
            model_name=model,
        )
    if status == 429:
        hint = "The provider is rate limiting: wait, lower the request rate, or raise your quota."
    elif status == 404:
        hint = "Check the model name and the base URL."
    elif status >= 500:
        hint = "The provider had a server error; try again later."
    else:
        hint = "The provider rejected the request; check the model settings and the messages sent."
    return ModelHTTPError(
        f"{provider} answered HTTP {status} for model {model!r}: {detail}. {hint}",
        status_code=status,
        model_name=model,
    )


def connection_error(
    provider: str, model: str, where: str, *, timed_out: bool, detail: str = ""
) -> ModelConnectionError:
    """The error for a request that could not reach the provider or did not finish in time."""
    detail = f" ({detail})" if detail else ""
    if timed_out:
        return ModelConnectionError(
            f"{provider} did not answer in time for model {model!r} at {where}{detail}. "
            "Raise ModelSettings.timeout, or check that the server is not overloaded."
        )
    return ModelConnectionError(
        f"Could not connect to {provider} at {where} for model {model!r}{detail}. "
        "Check the network, the base URL and that the server is running."
    )


async def retry_call(fn: Callable[[], Awaitable[T]], config: RetryConfig, *, model: str) -> T:
    """Await ``fn()``, retrying transient failures as ``config`` says, within its deadline."""
    import stamina  # the provider extras install it; test models never retry

    deadline = asyncio.timeout(config.deadline)
    try:
        async with deadline:
            async for attempt in stamina.retry_context(
                on=is_transient,
                attempts=config.attempts,
                timeout=config.deadline,
                wait_initial=config.wait_initial,
                wait_max=config.wait_max,
                wait_jitter=config.wait_jitter,
                wait_exp_base=config.wait_exp_base,
            ):
                with attempt:
                    return await fn()
    except TimeoutError:
        if not deadline.expired():
            raise
        raise ModelConnectionError(
            f"The request to model {model!r} did not succeed within its retry deadline of "
            f"{config.deadline} s (tries and waits together). Raise RetryConfig.deadline, or check the "
            "provider's status."
        ) from None
    raise AssertionError("unreachable: stamina either returns a result or raises")  # pragma: no cover


async def retry_stream(
    open_stream: Callable[[], AsyncGenerator[E, None]], config: RetryConfig, *, model: str
) -> AsyncGenerator[E, None]:
    """Yield the events of ``open_stream()``, retrying transient failures that happen before the first.

    After the first event has been yielded a failure propagates: the consumer has already acted on
    part of the answer, so repeating it would duplicate text or tool calls.
    """

    async def first_event() -> tuple[E, AsyncGenerator[E, None]]:
        events = open_stream()
        try:
            first = await anext(events)
        except StopAsyncIteration:
            await events.aclose()
            raise UnexpectedModelBehavior(
                f"The stream of model {model!r} ended without any event. Try a non-streamed request."
            ) from None
        except BaseException:
            await events.aclose()
            raise
        return first, events

    first, events = await retry_call(first_event, config, model=model)
    try:
        yield first
        async for event in events:
            yield event
    finally:
        await events.aclose()


def error_detail(body: object, fallback: str) -> str:
    """The human part of a provider's error body (``{"error": {"message": ...}}`` and variants)."""
    for _ in range(3):
        if isinstance(body, dict):
            message = body.get("message")
            if isinstance(message, str) and message:
                return message
            body = body.get("error")
        elif isinstance(body, str) and body:
            return body
    return fallback
