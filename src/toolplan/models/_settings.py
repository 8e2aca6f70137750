"""Per-request model settings and the retry configuration of a model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .._errors import UserError

__all__ = ("ForceTool", "ModelSettings", "ModelSettingsLike", "RetryConfig", "ToolChoice")

_TOOL_CHOICES = ("auto", "required", "none")
_MAX_TOOL_NAME = 200  # most characters in a forced tool's name
_MAX_EXTRA = 200  # most keys in extra_body / extra_headers


@dataclass(frozen=True, slots=True)
class ForceTool:
    """A `ModelSettings.tool_choice` that makes the model call one tool: ``ForceTool("submit_plan")``.

    Providers get their own form of it (OpenAI-compatible: ``{"type": "function", "function":
    {"name": ...}}``; Anthropic: ``{"type": "tool", "name": ...}``). The tool must be among the
    request's tools, else the request raises `UserError` before anything is sent.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 0 < len(self.name) <= _MAX_TOOL_NAME or self.name.strip() != self.name:
            raise UserError(
                f"ForceTool takes the name of one of the request's tools, such as ForceTool('get_weather'), "
                f"got {type(self.name).__name__} {_show(self.name)}."
            )


ToolChoice: TypeAlias = Literal["auto", "required", "none"] | ForceTool
"""What `ModelSettings.tool_choice` takes: ``"auto"``, ``"required"``, ``"none"`` or `ForceTool` (one named tool)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Settings for a model request; None means the provider's default.

    Settings given to a model's constructor are defaults; settings given to one request override
    them field by field (`merge`).

    Attributes:
        temperature: Sampling temperature.
        max_tokens: At most this many output tokens.
        top_p: Nucleus sampling.
        stop: Stop sequences.
        seed: Sampling seed, where the provider supports it.
        timeout: Seconds one HTTP request may take (each retry gets its own).
        parallel_tool_calls: Whether the model may call several tools in one turn.
        tool_choice: ``"auto"`` (model decides), ``"required"`` (must call a tool), ``"none"``, or
            ``ForceTool(name)`` (must call that tool; some servers constrain a call's arguments to the
            tool's schema only when the tool is named, as llama.cpp's chatml-function-calling does).
        extra_body: Extra JSON fields for the request body (provider-specific options).
        extra_headers: Extra HTTP headers.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    timeout: float | None = None
    parallel_tool_calls: bool | None = None
    tool_choice: ToolChoice | None = None
    extra_body: Mapping[str, Any] | None = None
    extra_headers: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p", "timeout"):
            _check(name, getattr(self, name), _is_number(getattr(self, name)), "a number")
        for name in ("max_tokens", "seed"):
            value = getattr(self, name)
            _check(name, value, isinstance(value, int) and not isinstance(value, bool), "a whole number")
        _check(
            "parallel_tool_calls", self.parallel_tool_calls, isinstance(self.parallel_tool_calls, bool), "True or False"
        )
        choice = self.tool_choice
        if not isinstance(choice, ForceTool):
            expected = "'auto', 'required' or 'none'" + ("" if isinstance(choice, str) else " or ForceTool(name)")
            _check("tool_choice", choice, choice in _TOOL_CHOICES, expected)
        for name in ("extra_body", "extra_headers"):
            value = getattr(self, name)
            ok = isinstance(value, Mapping) and len(value) <= _MAX_EXTRA and all(isinstance(k, str) for k in value)
            _check(name, value, ok, f"a mapping with at most {_MAX_EXTRA} string keys")
        if self.extra_headers is not None and not all(isinstance(v, str) for v in self.extra_headers.values()):
            raise UserError("ModelSettings.extra_headers takes string values, e.g. {'X-Request-Source': 'docs'}.")
        if isinstance(self.stop, str):
            raise UserError("ModelSettings.stop takes a tuple of strings, e.g. stop=('END',).")
        ok = isinstance(self.stop, tuple) and all(isinstance(s, str) for s in self.stop)
        _check("stop", self.stop, ok, "a tuple of strings, e.g. stop=('END',)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"ModelSettings.max_tokens must be >= 1, got {self.max_tokens}.")
        if self.timeout is not None and self.timeout <= 0:
            raise UserError(f"ModelSettings.timeout must be a positive number of seconds, got {self.timeout}.")

    @classmethod
    def coerce(cls, value: ModelSettingsLike | None) -> ModelSettings | None:
        """``value`` as `ModelSettings`: given as is, or built from a mapping like ``{"temperature": 0}``.

        A list for ``stop`` becomes a tuple. None stays None.

        Raises:
            UserError: ``value`` is neither `ModelSettings` nor a mapping, or a key is not a setting,
                or a value has the wrong type.
        """
        if value is None or isinstance(value, ModelSettings):
            return value
        known = tuple(f.name for f in dataclasses.fields(cls))
        if not isinstance(value, Mapping):
            raise UserError(
                f"Model settings must be a ModelSettings or a mapping such as {{'temperature': 0}}, "
                f"got {type(value).__name__}. Known settings: {', '.join(known)}."
            )
        unknown = [key for key in value if key not in known]
        if unknown:
            raise UserError(
                f"Unknown model setting {_show(unknown[0])}. Known settings: {', '.join(known)}; put "
                "provider-specific options in 'extra_body'."
            )
        fields: dict[str, Any] = dict(value)
        if isinstance(fields.get("stop"), list):
            fields["stop"] = tuple(fields["stop"])
        return cls(**fields)

    def merge(self, override: ModelSettingsLike | None) -> ModelSettings:
        """These settings with every field that ``override`` sets replacing ours.

        ``extra_body`` and ``extra_headers`` are merged key by key.
        """
        override = ModelSettings.coerce(override)
        if override is None:
            return self
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(override):
            value = getattr(override, f.name)
            if value is None:
                continue
            mine = getattr(self, f.name)
            if f.name in ("extra_body", "extra_headers") and mine is not None:
                value = {**mine, **value}
            changes[f.name] = value
        return dataclasses.replace(self, **changes)


ModelSettingsLike: TypeAlias = "ModelSettings | Mapping[str, Any]"
"""Where settings are taken: `ModelSettings`, or a mapping of its field names (``{"temperature": 0}``)."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."


def _check(name: str, value: object, ok: bool, expected: str) -> None:
    if value is not None and not ok:
        raise UserError(f"ModelSettings.{name} must be {expected}, got {type(value).__name__} {_show(value)}.")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryConfig:
    """How a model retries transient failures (429, 5xx, timeouts, connection errors).

    The wait before retry ``n`` (1-based) is ``min(wait_max, wait_initial * wait_exp_base ** (n - 1))``
    plus up to ``wait_jitter`` seconds at random: 1, 2, 4, 8 s by default. A provider's
    ``Retry-After`` (or ``retry-after-ms``) replaces that wait; a wait that would pass ``deadline``
    is not waited (the request fails at once, saying why). A refused first connection gets at most
    two short retries. Authentication errors and other 4xx answers are never retried.
    ``toolplan.testing.disable_retry_backoff()`` removes the waits (for tests).

    Attributes:
        attempts: Tries in total, the first included; 1 disables retries.
        wait_initial: Seconds to wait before the first retry.
        wait_max: The longest wait between two tries.
        wait_exp_base: Factor by which the wait grows.
        wait_jitter: Up to this many random seconds are added to each wait.
        deadline: Seconds for all tries and waits together (None: no overall limit). When it passes,
            the request fails with `ModelConnectionError`.
    """

    attempts: int = 5
    wait_initial: float = 1.0
    wait_max: float = 16.0
    wait_exp_base: float = 2.0
    wait_jitter: float = 1.0
    deadline: float | None = 120.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise UserError(f"RetryConfig.attempts counts the first try too and must be >= 1, got {self.attempts}.")
        if min(self.wait_initial, self.wait_max, self.wait_jitter) < 0:
            raise UserError("RetryConfig waits must be >= 0 seconds.")
        if self.deadline is not None and self.deadline <= 0:
            raise UserError(
                f"RetryConfig.deadline must be a positive number of seconds (or None), got {self.deadline}."
            )

    @classmethod
    def no_retries(cls, *, deadline: float | None = 120.0) -> RetryConfig:
        """A configuration that tries once."""
        return cls(attempts=1, deadline=deadline)


def check_forced_tool(choice: ForceTool, tool_names: Sequence[str]) -> None:
    """For a provider adapter: raise `UserError` when ``choice`` forces a tool the request does not offer.

    Raises:
        UserError: no provider could call that tool.
    """
    if choice.name not in tool_names:
        raise UserError(
            f"ModelSettings.tool_choice forces tool {choice.name!r}, which is not among this request's tools "
            f"({', '.join(tool_names) or 'none'}). Force one of them, or use 'required'."
        )
