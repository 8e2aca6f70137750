"""Retrying model requests with stamina, and the errors the adapters raise.

Only transient failures are retried: HTTP 408/409/425/429 and 5xx, timeouts, connection errors.
A stream is retried only until its first event: once something was yielded, a failure propagates.

The wait before each retry is decided here (stamina sleeps it, and skips it in its test mode):

- the provider's own ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` when it sends
  one, else the exponential backoff of the `RetryConfig`;
- a server that refuses the very first connection (nothing listening: a local server that is not
  started) gets at most `REFUSED_RETRIES` short retries, not the whole policy;
- a wait that would pass the retry deadline is not waited: the request fails at once, saying why.

Each retry is logged as one line on the ``toolplan.models`` logger (WARNING), and stamina's own
log record for it is dropped, so a retry reads as "what failed, attempt n of m, next in s".
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .._errors import (
    ModelAuthError,
    ModelConnectionError,
    ModelHTTPError,
    RunError,
    UnexpectedModelBehavior,
)
from ._settings import RetryConfig

__all__ = (
    "MAX_PROVIDER_WAIT",
    "REFUSED_RETRIES",
    "Endpoint",
    "connection_error",
    "error_detail",
    "failure_summary",
    "is_refused",
    "is_transient",
    "retry_after",
    "retry_call",
    "retry_stream",
    "status_error",
)

T = TypeVar("T")
E = TypeVar("E")

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
REFUSED_RETRIES = 2
"""Retries after the first connection to a server was refused (waits of 0.25 s, then 0.5 s)."""
_REFUSED_WAIT = 0.25
MAX_PROVIDER_WAIT = 600.0
"""The longest ``Retry-After`` honoured when the retry policy has no deadline; longer fails at once."""
_MAX_CHAIN = 8  # how far down __cause__/__context__ to look for the root of a failure
_MAX_HEADER = 64  # longer Retry-After values are not parsed

logger = logging.getLogger("toolplan.models")
_in_model_retry: contextvars.ContextVar[bool] = contextvars.ContextVar("toolplan_model_retry", default=False)
_stamina_filtered = False


@dataclass(slots=True, kw_only=True)
class Endpoint:
    """What a model talks to, for messages and to tell a server that is down from one that hiccups.

    Attributes:
        provider: The provider's label in messages, e.g. ``"OpenAI"``.
        url: The base URL requests actually go to (set from the SDK client before each request).
        reached: True once the server answered anything (any HTTP status).
    """

    provider: str
    url: str = ""
    reached: bool = False


def is_transient(exc: BaseException) -> bool:
    """True for failures worth another try: rate limits, server errors, timeouts, lost connections."""
    if isinstance(exc, ModelAuthError):
        return False
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
    return isinstance(exc, ModelConnectionError)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, at most `_MAX_CHAIN` deep (a hostile chain may be long or cyclic)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(out) < _MAX_CHAIN and all(current is not seen for seen in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def is_refused(exc: BaseException) -> bool:
    """True when the failure comes from a refused connection: nothing listens at that address."""
    return any(isinstance(e, ConnectionRefusedError) for e in _chain(exc))


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait (``retry-after-ms``, ``Retry-After``), or None.

    The headers are read from the HTTP response of the SDK error that caused ``exc``. Values that are
    negative, not numbers, or absurdly long strings are ignored.
    """
    for e in _chain(exc):
        headers = getattr(getattr(e, "response", None), "headers", None)
        get = getattr(headers, "get", None)
        if get is None:
            continue
        ms = _number(get("retry-after-ms"))
        if ms is not None:
            return ms / 1000
        raw = get("retry-after")
        seconds = _number(raw)
        if seconds is not None:
            return seconds
        if isinstance(raw, str) and len(raw) <= _MAX_HEADER:
            import email.utils  # here, not at import: the email package costs ~3 ms of every `import toolplan`

            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                return None
            if when.tzinfo is None:
                return None
            return max(0.0, when.timestamp() - time.time())
        return None
    return None


def _number(raw: object) -> float | None:
    if not isinstance(raw, str) or len(raw) > _MAX_HEADER:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def failure_summary(exc: BaseException) -> str:
    """A few words on what failed, for the retry log line: ``HTTP 429``, ``connection refused``."""
    if isinstance(exc, ModelHTTPError):
        return f"HTTP {exc.status_code}"
    if is_refused(exc):
        return "connection refused"
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in _chain(exc)):
        return "no answer in time"
    return "could not connect"


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
    provider: str, model: str, where: str, exc: BaseException, *, timed_out: bool, fix: str = "base_url=..."
) -> ModelConnectionError:
    """The error for a request that could not reach the provider at ``where`` or did not finish in time.

    ``fix`` says where the URL comes from (``"base_url=... or OPENAI_BASE_URL"``).
    """
    who = f"the {provider[4:]}" if provider.startswith("The ") else provider  # mid-sentence
    if timed_out:
        return ModelConnectionError(
            f"{provider} did not answer in time for model {model!r} at {where}. "
            "Raise ModelSettings.timeout, or check that the server is not overloaded."
        )
    if is_refused(exc):
        return ModelConnectionError(
            f"Could not connect to {who} at {where} for model {model!r}: connection refused, nothing is "
            f"listening there. Start the server, or fix the URL ({fix})."
        )
    cause = exc.__cause__ or exc
    detail = str(cause)[:300] or type(cause).__name__
    return ModelConnectionError(
        f"Could not connect to {who} at {where} for model {model!r} ({detail}). "
        "Check the network, the base URL and that the server is running."
    )


class _Policy:
    """Decides, after each failure, whether to retry and how long to wait first (stamina's ``on`` hook)."""

    def __init__(self, config: RetryConfig, *, model: str, endpoint: Endpoint | None) -> None:
        self.config = config
        self.model = model
        self.endpoint = endpoint
        self.start = asyncio.get_running_loop().time()
        self.failures = 0
        self.limit = config.attempts
        self.short = False  # the first connection was refused: a couple of short retries only
        self.gave_up: tuple[BaseException, str] | None = None

    def __call__(self, exc: Exception) -> bool | float:
        if not is_transient(exc):
            return False
        self.failures += 1
        n, config, endpoint = self.failures, self.config, self.endpoint
        if isinstance(exc, ModelHTTPError) and endpoint is not None:
            endpoint.reached = True
        if n == 1 and is_refused(exc) and not (endpoint is not None and endpoint.reached):
            self.short = True
            self.limit = min(self.limit, 1 + REFUSED_RETRIES)
        if n >= self.limit:
            return False
        try:
            backoff = min(config.wait_max, config.wait_initial * config.wait_exp_base ** (n - 1))
        except OverflowError:  # thousands of attempts
            backoff = config.wait_max
        asked = retry_after(exc)
        if self.short:
            wait = min(backoff, _REFUSED_WAIT * 2.0 ** (n - 1))
        elif asked is not None:
            wait = asked
        else:
            jitter = random.uniform(0, config.wait_jitter) if config.wait_jitter else 0.0
            wait = min(config.wait_max, backoff + jitter)
        used = asyncio.get_running_loop().time() - self.start
        if config.deadline is not None and used + wait > config.deadline:
            said = (
                f"The provider asked to wait {_secs(asked)} s before retrying"
                if asked is not None
                else f"The next retry would start after {_secs(wait)} s more"
            )
            self.gave_up = (
                exc,
                f"{said}, which would pass the retry deadline of {_secs(config.deadline)} s "
                f"({_secs(used)} s already used), so toolplan did not wait. Retry later, or raise "
                "RetryConfig.deadline.",
            )
            return False
        if asked is not None and asked > MAX_PROVIDER_WAIT:
            self.gave_up = (
                exc,
                f"The provider asked to wait {_secs(asked)} s before retrying, longer than toolplan waits "
                f"without a deadline ({_secs(MAX_PROVIDER_WAIT)} s), so it did not wait. Retry later.",
            )
            return False
        where = f" at {endpoint.url}" if endpoint is not None and endpoint.url else ""
        provider = f"{endpoint.provider}{where}" if endpoint is not None else "The provider"
        why = f"{failure_summary(exc)}" + (f", asked to wait {_secs(asked)} s" if asked is not None else "")
        logger.warning(
            "%s, model %r: %s. Attempt %d of %d failed; next in %s s.",
            provider,
            self.model,
            why,
            n,
            self.limit,
            _secs(wait),
        )
        return wait

    def give_up_error(self, exc: BaseException) -> BaseException:
        """``exc`` with the reason retries stopped early, when they did; else ``exc`` itself."""
        if self.gave_up is None or self.gave_up[0] is not exc or not isinstance(exc, RunError):
            return exc
        message = f"{exc.message} {self.gave_up[1]}"
        if isinstance(exc, ModelHTTPError):
            return ModelHTTPError(message, status_code=exc.status_code, model_name=exc.model_name)
        return ModelConnectionError(message)


def _secs(value: float | None) -> str:
    """Seconds for messages: ``0.25``, ``2``, ``30``."""
    if value is None:
        return "?"
    if value >= 1e7:  # a hostile Retry-After: no 300-digit numbers in messages
        return f"{value:.3g}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.0f}"


class _DropStaminaRecords(logging.Filter):
    """Drops stamina's own log record for retries toolplan logs itself (one readable line each)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _in_model_retry.get()


def _filter_stamina_log() -> None:
    global _stamina_filtered
    if not _stamina_filtered:
        logging.getLogger("stamina").addFilter(_DropStaminaRecords())
        _stamina_filtered = True


async def retry_call(
    fn: Callable[[], Awaitable[T]], config: RetryConfig, *, model: str, endpoint: Endpoint | None = None
) -> T:
    """Await ``fn()``, retrying transient failures as ``config`` says, within its deadline.

    ``endpoint`` names the server in log lines and remembers whether it ever answered (a refused
    first connection is retried only briefly).
    """
    import stamina  # the provider extras install it; test models never retry

    _filter_stamina_log()
    policy = _Policy(config, model=model, endpoint=endpoint)
    deadline = asyncio.timeout(config.deadline)
    token = _in_model_retry.set(True)
    try:
        async with deadline:
            async for attempt in stamina.retry_context(
                on=policy,
                attempts=config.attempts,
                timeout=config.deadline,
                wait_initial=config.wait_initial,
                wait_max=config.wait_max,
                wait_jitter=config.wait_jitter,
                wait_exp_base=config.wait_exp_base,
            ):
                with attempt:
                    result = await fn()
                    if endpoint is not None:
                        endpoint.reached = True
                    return result
    except TimeoutError:
        if not deadline.expired():
            raise
        raise ModelConnectionError(
            f"The request to model {model!r} did not succeed within its retry deadline of "
            f"{config.deadline} s (tries and waits together). Raise RetryConfig.deadline, or check the "
            "provider's status."
        ) from None
    except (ModelHTTPError, ModelConnectionError) as exc:
        better = policy.give_up_error(exc)
        if better is exc:
            raise
        raise better from exc
    finally:
        _in_model_retry.reset(token)
    raise AssertionError("unreachable: stamina either returns a result or raises")  # pragma: no cover


async def retry_stream(
    open_stream: Callable[[], AsyncGenerator[E, None]],
    config: RetryConfig,
    *,
    model: str,
    endpoint: Endpoint | None = None,
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

    first, events = await retry_call(first_event, config, model=model, endpoint=endpoint)
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
