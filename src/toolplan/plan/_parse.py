"""Dialect parsers: native, chaining and parallel batch, all into the same `Plan` IR.

Parsing is lenient about structure so that validation can report every problem at once: each
problem becomes a `PlanIssue` and parsing goes on with a placeholder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from .._errors import PlanIssue
from .._json import MAX_DEPTH, JSONTextError, loads, too_deep
from .._records import maker
from ..tools._internal import inline_group_name
from ._fields import (
    ID_RE,
    _budget,
    _failure_mode,
    _flag,
    _id_match,
    _id_message,
    _Issues,
    _label,
    _positive,
    _positive_int,
    _retry,
    _show,
    check_plan_fields,
)
from ._ir import MAX_FALLBACK_DEPTH, Dialect, Fallback, Plan, Step

__all__ = ("BATCH_MAX_STEPS", "detect_dialect", "parse_source")

BATCH_MAX_STEPS = 50

_new_step = maker(Step)  # a Step per step of every plan: the cheaper way to make one
_new_plan = maker(Plan)

_NATIVE_STEP_KEYS = frozenset(
    {
        "id",
        "tool",
        "arguments",
        "depends_on",
        "after",
        "when",
        "timeout",
        "retry",
        "fallback",
        "rationale",
        "expected_outcome",
    }
)
_BASIC_STEP_KEYS = frozenset({"id", "tool", "arguments"})  # a step with these keys only has no optional field


def _load(source: str | bytes, issues: _Issues) -> Any:
    try:
        return loads(source)
    except JSONTextError as exc:
        what = "cannot be read as JSON" if exc.exceeds_limit else "is not valid JSON"
        issues.error(
            "invalid_json", f"The plan {what}: {exc.message}. {exc.advice} and send the plan as one JSON object."
        )
        return None


def detect_dialect(data: Mapping[str, Any]) -> Dialect | None:
    """Guess the dialect of a plan object, or None when it matches none."""
    if isinstance(data.get("tools"), list):
        return "chaining"
    steps = data.get("steps")
    if isinstance(steps, list):
        batch = False
        for s in steps:
            if isinstance(s, dict):
                if "args" not in s or "id" in s or "arguments" in s:
                    return "native"
                batch = True
        return "batch" if batch else "native"
    return None


def parse_source(source: Any, *, dialect: Dialect | None = None) -> tuple[Plan | None, list[PlanIssue]]:
    """Parse a dict, JSON text or `Plan` into a `Plan` plus every structural problem found."""
    issues = _Issues()
    if isinstance(source, Plan):
        issues.extend(check_plan_fields(source))
        return source, issues
    data = _load(source, issues) if isinstance(source, (str, bytes)) else source
    if issues:
        return None, issues
    if not isinstance(data, dict):
        issues.error(
            "invalid_plan",
            f"A plan must be a JSON object with a 'steps' list, got {type(data).__name__}.",
        )
        return None, issues
    obj: dict[str, Any] = data  # data is Any: no cast (a subscripted cast builds a generic alias per call)
    if "plannedSequence" in obj or "ToolCallPlan" in obj or "toolCallPlan" in obj:
        issues.error(
            "declared_plan",
            "This is a declared plan (a ToolCallPlan with a plannedSequence): it describes intended calls for "
            "an audit and is not run. Pass a declaration to the declare_plan tool (Agent(declare_plan=True)), "
            "to toolplan.policy.parse_declaration, or to 'toolplan audit RUN_ID --declared FILE'; to run the "
            "calls, send an executable plan with 'steps' instead.",
        )
        return None, issues
    kind = dialect or detect_dialect(obj)
    if kind is None:
        issues.error(
            "invalid_plan",
            'The plan has no \'steps\' list. Write {"steps": [{"id": ..., "tool": ..., '
            '"arguments": {...}}], "output_steps": [...]}.',
        )
        return None, issues
    if kind == "chaining":
        return _parse_chaining(obj, issues), issues
    if kind == "batch":
        return _parse_batch(obj, issues), issues
    return _parse_native(obj, issues), issues


def _arguments(raw: Any, where: str, step: str | None, issues: _Issues) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            raw = loads(text)
        except JSONTextError as exc:
            what = "cannot be read as JSON" if exc.exceeds_limit else "is not valid JSON"
            issues.error(
                "invalid_arguments_json",
                f"{where} is a string that {what}: {exc.message}. {exc.advice} and give arguments as a JSON object.",
                step,
            )
            return {}
    if not isinstance(raw, dict):
        issues.error(
            "invalid_arguments_json",
            f"{where} must be a JSON object of argument names to values, got {type(raw).__name__}.",
            step,
        )
        return {}
    if too_deep(raw, MAX_DEPTH):
        issues.error("invalid_arguments_json", _too_deep_message(where), step)
        return {}
    arguments: dict[str, Any] = raw
    return arguments


def _too_deep_message(where: str) -> str:
    return (
        f"{where} hold values nested deeper than {MAX_DEPTH} levels (or a value that contains itself). "
        f"Nest values at most {MAX_DEPTH} levels deep."
    )


def _str_list(raw: Any, field: str, step: str | None, issues: _Issues) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list):
        items: list[Any] = raw
        for x in items:  # (a loop, not all() over a generator: this runs for every plan)
            if not isinstance(x, str):
                break
        else:
            return tuple(items)
    issues.error("invalid_field", f"'{field}' must be a step id or a list of step ids.", step)
    return ()


def _step_id(raw: Any, index: int, issues: _Issues) -> str:
    if not isinstance(raw, str) or not raw.strip():
        issues.error(
            "missing_id",
            f"Step #{index + 1} has no 'id'. Give every step a unique id such as 's{index + 1}'.",
        )
        return f"#{index + 1}"
    if ID_RE.fullmatch(raw) is None:
        issues.error("invalid_id", _id_message(raw, index), _label(raw))
    return raw


def _tool_name(raw: Any, step: str, issues: _Issues) -> str:
    if not isinstance(raw, str) or not raw.strip():
        issues.error("missing_tool", "The step has no 'tool'. Name one of the available tools.", step)
        return ""
    return raw


def _parse_native(data: dict[str, Any], issues: _Issues) -> Plan:
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        issues.error("invalid_plan", "'steps' must be a list of step objects.")
        raw_steps = []
    steps: list[Step] = []
    with_issues: list[tuple[int, str, int, int]] = []  # (position, id, first, end): steps with issues
    for i, raw in enumerate(raw_steps):
        if type(raw) is dict and len(raw) == 3:
            s: dict[str, Any] = raw  # raw is Any; a cast would cost a call per step
            # The common step: a good id, a tool's name, an arguments object and no other field.
            # Nothing in it can be wrong, so it is made at once (the code below checks any other).
            try:
                raw_id, tool_raw, args_raw = s["id"], s["tool"], s["arguments"]
            except KeyError:
                pass
            else:
                if (
                    type(raw_id) is str
                    and type(tool_raw) is str
                    and type(args_raw) is dict
                    and _id_match(raw_id) is not None
                    and tool_raw.strip()
                ):
                    steps.append(_new_step(id=raw_id, tool=tool_raw, arguments=args_raw))
                    continue
        elif not isinstance(raw, dict):
            issues.error("invalid_step", f"Step #{i + 1} must be an object with 'id', 'tool' and 'arguments'.")
            continue
        s = raw
        get = s.get
        first = len(issues)
        sid = _step_id(get("id"), i, issues)
        args_raw = get("arguments")
        fallback = None
        if _BASIC_STEP_KEYS.issuperset(s):  # the common step, with no optional field: none to look up
            depends_on = after = timeout = retry = rationale = expected = when = None
        else:
            if args_raw is None and "args" in s:
                issues.warn("alias", "'args' was read as 'arguments'; write 'arguments' in native plans.", sid)
                args_raw = s["args"]
            if not _NATIVE_STEP_KEYS.issuperset(s):
                for key in s:
                    if key not in _NATIVE_STEP_KEYS and key != "args":
                        issues.warn("unknown_field", f"Field {key!r} is not part of a step and was ignored.", sid)
            fb = get("fallback")
            if fb is not None:
                fallback = _fallback(fb, sid, issues, 1)
            # Optional fields are usually absent: the helpers run only for the ones present.
            depends_on, after, timeout, retry = get("depends_on"), get("after"), get("timeout"), get("retry")
            rationale, expected, when = get("rationale"), get("expected_outcome"), get("when")
            rationale = rationale if isinstance(rationale, str) else None
            expected = expected if isinstance(expected, str) else None
        tool_raw = get("tool")
        one_of: tuple[str, ...] = ()
        if type(tool_raw) is dict:  # {"one_of": [...]}: alternatives, one chosen when the step runs
            one_of = _one_of(tool_raw, sid, issues)
            tool = inline_group_name(one_of) if one_of else ""
        else:
            tool = _tool_name(tool_raw, sid, issues)
        steps.append(
            _new_step(
                id=sid,
                tool=tool,
                arguments=args_raw if type(args_raw) is dict else _arguments(args_raw, "'arguments'", sid, issues),
                depends_on=() if depends_on is None else _str_list(depends_on, "depends_on", sid, issues),
                after=() if after is None else _str_list(after, "after", sid, issues),
                timeout=None if timeout is None else _positive(timeout, "timeout", sid, issues),
                retry=None if retry is None else _retry(retry, sid, issues),
                fallback=fallback,
                rationale=rationale,
                expected_outcome=expected,
                one_of=one_of,
                when=when,
            )
        )
        if len(issues) > first:  # (positions count the steps kept, as validation does)
            with_issues.append((len(steps), sid, first, len(issues)))
    if with_issues:
        _name_duplicates_by_position(issues, with_issues, [s.id for s in steps])
    return _new_plan(
        steps=tuple(steps),
        output_steps=_str_list(data.get("output_steps"), "output_steps", None, issues),
        goal=data.get("goal") if isinstance(data.get("goal"), str) else None,
        budget=_budget(data.get("budget"), issues),
        policy=_policy_text(data["policy"], issues) if "policy" in data else None,
        max_concurrency=_positive_int(data.get("max_concurrency"), "max_concurrency", issues),
        failure_mode=_failure_mode(data.get("failure_mode"), "fail_forward", issues),
        dialect="native",
        share_calls=_flag(data.get("share_calls"), "share_calls", True, issues),
        missing_field="null",
    )


def _policy_text(raw: Any, issues: _Issues) -> str | None:
    """A plan's ``policy``: text as written, or an object (the ACP proposal's) as the same text.

    ``{"strategy": "EpsilonGreedy", "explorationRate": 0.2, "preferGeneralMethods": true}`` is
    ``"EpsilonGreedy, explorationRate=0.2, prefer_general_methods"``.
    """
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        obj: dict[str, Any] = raw
        words = [obj["strategy"]] if isinstance(obj.get("strategy"), str) else []
        for key in ("explorationRate", "exploration_rate", "epsilon", "temperature"):
            value = obj.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                words.append(f"{key}={value}")
        if obj.get("preferGeneralMethods") is True or obj.get("prefer_general_methods") is True:
            words.append("prefer_general_methods")
        return ", ".join(words) or None
    issues.warn("ignored_field", f"'policy' must be text or an object, got {_show(raw)}; it was ignored.")
    return None


_FALLBACK_KEYS = frozenset({"tool", "arguments", "fallback"})


def _fallback(raw: Any, sid: str, issues: _Issues, depth: int) -> Fallback | None:
    """A step's ``fallback`` (link ``depth`` of its chain), its own ``fallback`` included."""
    where = "The fallback" if depth == 1 else f"Fallback #{depth}"
    if not isinstance(raw, dict):
        issues.error(
            "invalid_field",
            f'{where} must be an object {{"tool": ..., "arguments": {{...}}, "fallback": ...}} '
            "(the fallback's own fallback is optional).",
            sid,
        )
        return None
    fbd: dict[str, Any] = raw
    args_raw = fbd.get("arguments")
    if args_raw is None and "args" in fbd:
        issues.warn("alias", f"{where}'s 'args' was read as 'arguments'; write 'arguments'.", sid)
        args_raw = fbd["args"]
    for key in fbd:
        if key not in _FALLBACK_KEYS and key != "args":
            issues.warn(
                "unknown_field",
                f"{where}'s field {key!r} is not part of a fallback (tool, arguments, fallback) and was ignored.",
                sid,
            )
    inner = None
    nested = fbd.get("fallback")
    if nested is not None:
        if depth >= MAX_FALLBACK_DEPTH:
            issues.error(
                "fallback_too_deep",
                f"The step's fallbacks are nested more than {MAX_FALLBACK_DEPTH} deep. Give it at most "
                f"{MAX_FALLBACK_DEPTH} fallbacks, each inside the one before.",
                sid,
            )
        else:
            inner = _fallback(nested, sid, issues, depth + 1)
    return Fallback(
        tool=_tool_name(fbd.get("tool"), sid, issues),
        arguments=_arguments(args_raw, f"{where}'s 'arguments'", sid, issues),
        fallback=inner,
    )


_ONE_OF_MESSAGE = (
    '\'tool\' must be a tool name, or {"one_of": ["tool_a", "tool_b"]} to let the run choose between '
    "interchangeable tools."
)


def _one_of(raw: dict[str, Any], sid: str, issues: _Issues) -> tuple[str, ...]:
    """The alternatives of ``"tool": {"one_of": [...]}`` (checked against the tools by validation)."""
    names: Any = raw.get("one_of")
    if set(raw) != {"one_of"} or not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        issues.error("invalid_field", _ONE_OF_MESSAGE, sid)
        return ()
    listed: list[str] = names
    if len(listed) < 2 or len(set(listed)) != len(listed):
        issues.error(
            "invalid_alternatives",
            f"'one_of' must list at least two different tools, got {_show_list(listed)}. "
            "Name the one tool directly, or list each alternative once.",
            sid,
        )
        return ()
    return tuple(listed)


def _show_list(names: list[str]) -> str:
    return "[" + ", ".join(_show(n) for n in names[:10]) + (", ...]" if len(names) > 10 else "]")


def _name_duplicates_by_position(issues: _Issues, with_issues: list[tuple[int, str, int, int]], ids: list[str]) -> None:
    """Prefix the issues of steps whose id is used more than once with the step's position."""
    positions = duplicate_positions(ids)
    if not positions:
        return
    for position, sid, first, end in with_issues:
        if sid in positions:
            issues[first:end] = name_by_position(issues[first:end], sid, position, positions[sid])


def duplicate_positions(ids: list[str]) -> dict[str, list[int]]:
    """The 1-based positions of every id used more than once."""
    seen: dict[str, list[int]] = {}
    for n, sid in enumerate(ids, 1):
        seen.setdefault(sid, []).append(n)
    return {sid: ns for sid, ns in seen.items() if len(ns) > 1}


def name_by_position(issues: list[PlanIssue], sid: str, position: int, positions: list[int]) -> list[PlanIssue]:
    """``issues`` about step ``sid``, their messages starting with the step's position (its id is ambiguous)."""
    listed = ", ".join(f"#{n}" for n in positions[:-1]) + f" and #{positions[-1]}"
    where = f"Step #{position} (id {_show(sid)} is used by steps {listed}): "
    return [replace(i, message=where + i.message) if i.step == sid else i for i in issues]


def _parse_chaining(data: dict[str, Any], issues: _Issues) -> Plan:
    raw_tools = data.get("tools") or []
    steps: list[Step] = []
    counts: dict[str, int] = {}
    for i, raw in enumerate(raw_tools):
        if not isinstance(raw, dict):
            issues.error("invalid_step", f"tools[{i}] must be an object with 'name' and 'parameters'.")
            continue
        t: dict[str, Any] = raw
        name = _tool_name(t.get("name"), f"tools[{i}]", issues)
        counts[name] = counts.get(name, 0) + 1
        sid = name if counts[name] == 1 else f"{name}_{counts[name]}"
        _warn_unknown(t, _CHAINING_KEYS, "a chaining tool entry (name, parameters, dependsOn, runAfter)", sid, issues)
        steps.append(
            _new_step(
                id=sid,
                tool=name,
                arguments=_arguments(t.get("parameters"), "'parameters'", sid, issues),
                depends_on=_str_list(t.get("dependsOn"), "dependsOn", sid, issues),
                after=_str_list(t.get("runAfter"), "runAfter", sid, issues),
                when=t.get("when"),
            )
        )
    order = data.get("executionOrder")
    if order is not None:
        resolved = _check_execution_order(order, steps, issues)
        if resolved is not None:  # the steps in the order they run
            position = {sid: i for i, sid in enumerate(resolved)}
            steps.sort(key=lambda s: position[s.id])
    parallel = data.get("parallel")
    if parallel is not None and not isinstance(parallel, bool):
        issues.error("invalid_field", f"'parallel' must be true or false, got {_show(parallel)}.")
    return _new_plan(
        steps=tuple(steps),
        output_steps=_str_list(data.get("output_steps"), "output_steps", None, issues),
        # One step at a time in 'executionOrder' (else as listed), unless the plan asks for parallel steps.
        max_concurrency=None if parallel is True else 1,
        failure_mode=_failure_mode(data.get("failure_mode"), "fail_fast", issues),
        dialect="chaining",
        missing_field="keep",
    )


_CHAINING_KEYS = frozenset({"name", "parameters", "dependsOn", "runAfter"})
_BATCH_KEYS = frozenset({"tool", "args"})


def _warn_unknown(entry: dict[str, Any], known: frozenset[str], what: str, sid: str, issues: _Issues) -> None:
    """A validation warning for each field of ``entry`` that is not read (it would be ignored)."""
    if not known.issuperset(entry):
        for key in entry:
            if key not in known:
                issues.warn("unknown_field", f"Field {key!r} is not part of {what} and was ignored.", sid)


def _check_execution_order(order: Any, steps: list[Step], issues: _Issues) -> list[str] | None:
    """The step ids in ``executionOrder``'s order, or None when it is not a valid order of the steps."""
    if not isinstance(order, list) or not all(isinstance(x, str) for x in order):
        issues.error("invalid_execution_order", "'executionOrder' must be a list of tool names.")
        return None
    ids = [s.id for s in steps]
    seen_names: dict[str, int] = {}
    resolved: list[str] = []
    for entry in cast(list[str], order):
        # The k-th mention of a repeated tool name is its k-th step (ids 'name', 'name_2', ...).
        k = seen_names[entry] = seen_names.get(entry, 0) + 1
        resolved.append(entry if k == 1 else f"{entry}_{k}")
    if sorted(resolved) != sorted(ids):
        missing = [i for i in ids if i not in resolved]
        extra = [r for r in resolved if r not in ids]
        issues.error(
            "invalid_execution_order",
            f"'executionOrder' must list every step exactly once (missing: {missing or 'none'}, "
            f"unknown or repeated: {extra or 'none'}).",
        )
        return None
    position = {sid: i for i, sid in enumerate(resolved)}
    valid = True
    for s in steps:
        for dep in (*s.depends_on, *s.after):
            if dep in position and position[dep] > position[s.id]:
                issues.error(
                    "invalid_execution_order",
                    f"'executionOrder' runs {s.id!r} before {dep!r}, which it depends on or runs after. "
                    "List every step after its dependencies.",
                    s.id,
                )
                valid = False
    return resolved if valid else None


def _parse_batch(data: dict[str, Any], issues: _Issues) -> Plan:
    raw_steps = data.get("steps") or []
    if len(raw_steps) > BATCH_MAX_STEPS:
        issues.error(
            "too_many_steps",
            f"A batch may have at most {BATCH_MAX_STEPS} steps, got {len(raw_steps)}. Split it into several batches.",
        )
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        sid = str(i)
        if not isinstance(raw, dict):
            issues.error("invalid_step", f"Step #{i} must be an object with 'tool' and 'args'.", sid)
            continue
        s: dict[str, Any] = raw
        _warn_unknown(s, _BATCH_KEYS, "a batch step (tool, args)", sid, issues)
        steps.append(
            _new_step(
                id=sid,
                tool=_tool_name(s.get("tool"), sid, issues),
                arguments=_arguments(s.get("args"), "'args'", sid, issues),
            )
        )
    return _new_plan(steps=tuple(steps), dialect="batch")
