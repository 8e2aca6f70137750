"""Run records: `fast_init` keeps a frozen dataclass's constructor contract while making it cheaper, and
`StepResult` / `PlanResult` read back exactly what their ``to_dict`` wrote."""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolplan import PlanIssue
from toolplan._records import fast_init, maker
from toolplan.execute import Choice, ErrorKind, PlanResult, StepError, StepResult, StepStatus
from toolplan.plan import Dialect, Step


def _make() -> tuple[Any, Any]:
    def build() -> type:
        @dataclass(frozen=True, slots=True, kw_only=True)
        class Record:
            id: str
            tags: list[str] = field(default_factory=list[str])
            limit: int | None = None
            ok: bool = True

            def __post_init__(self) -> None:
                if self.limit is not None and self.limit < 0:
                    raise ValueError("limit must be >= 0")

        return Record

    return build(), fast_init(build())


def test_same_signature_defaults_and_factories() -> None:
    plain, fast = _make()
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    a, b = fast(id="x"), fast(id="x")
    assert a.tags == [] and a.tags is not b.tags  # a fresh default per instance
    assert (a.limit, a.ok) == (None, True)
    assert fast(id="y", tags=["t"], limit=3, ok=False) == fast(id="y", tags=["t"], limit=3, ok=False)
    assert repr(fast(id="z")) == repr(plain(id="z")).replace(plain.__qualname__, fast.__qualname__)


def test_stays_frozen_and_runs_post_init() -> None:
    _, fast = _make()
    record = fast(id="x")
    with pytest.raises(FrozenInstanceError):
        record.id = "y"
    with pytest.raises(ValueError, match="limit"):
        fast(id="x", limit=-1)
    with pytest.raises(TypeError):
        fast("x")  # keyword-only, as declared


def test_positional_fields() -> None:
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Pair:
        left: str
        right: str = "r"

    assert Pair("a") == Pair(left="a", right="r")
    assert hash(Pair("a", "b")) == hash(Pair("a", "b"))


def test_refuses_what_it_cannot_keep() -> None:
    @dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclass(frozen=True, slots=True)
    class NoInit:
        x: int
        y: int = field(default=0, init=False)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        x: int
        seed: dataclasses.InitVar[int] = 0

    for cls in (NotFrozen, NoInit, WithInitVar):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


def test_plan_ir_uses_it() -> None:
    step = Step(id="s1", tool="t")
    assert step.arguments == {} and step.depends_on == () and step.kind == "step"
    with pytest.raises(FrozenInstanceError):
        step.tool = "u"  # type: ignore[misc]


@pytest.mark.parametrize("wide", [False, True], ids=["few fields", "four or more fields"])
def test_the_object_has_its_own_class_from_post_init_on(wide: bool) -> None:
    seen: list[type] = []

    @dataclass(frozen=True, slots=True)
    class Narrow:
        x: int

        def __post_init__(self) -> None:
            seen.append(type(self))

    @dataclass(frozen=True, slots=True)
    class Wide:
        x: int
        y: int = 0
        z: int = 0
        w: int = 0

        def __post_init__(self) -> None:
            seen.append(type(self))

    cls: Any = fast_init(Wide if wide else Narrow)
    record = cls(1)
    assert type(record) is cls and seen == [cls] and record.x == 1
    with pytest.raises(FrozenInstanceError):
        record.x = 2
    with pytest.raises(FrozenInstanceError):
        del record.x
    replaced = dataclasses.replace(record, x=3)
    assert replaced == cls(3) and type(replaced) is cls


def test_subclasses_keep_the_dataclass_constructor() -> None:
    _, fast = _make()

    class Tagged(fast):  # type: ignore[misc, valid-type]
        pass  # no __slots__: instances have a __dict__, a layout the fast path must not touch

    record = Tagged(id="x")
    assert type(record) is Tagged and record.tags == [] and record.id == "x"
    with pytest.raises(ValueError, match="limit"):
        Tagged(id="x", limit=-1)  # the dataclass __init__ still runs __post_init__
    with pytest.raises(FrozenInstanceError):
        record.id = "y"


@pytest.mark.parametrize("wide", [False, True], ids=["few fields", "four or more fields"])
def test_maker_makes_what_the_class_makes(wide: bool) -> None:
    _, fast = _make()
    make: Any = maker(fast)
    record = make(id="x", tags=["t"], limit=2)
    assert type(record) is fast and record == fast(id="x", tags=["t"], limit=2)
    assert hash(make(id="y", tags=(), limit=1)) == hash(fast(id="y", tags=(), limit=1))
    a, b = make(id="x"), make(id="x")
    assert a.tags == [] and a.tags is not b.tags and (a.limit, a.ok) == (None, True)  # defaults, fresh factories
    with pytest.raises(ValueError, match="limit"):
        make(id="x", limit=-1)  # __post_init__ runs
    with pytest.raises(FrozenInstanceError):
        record.id = "y"
    # By position too (its type still asks for keywords): defaults from a tuple cost less than keyword-only ones.
    assert make("x") == make(id="x")
    assert dataclasses.replace(record, id="z") == fast(id="z", tags=["t"], limit=2)

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Small:
        x: int
        y: int = 0

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Wide:
        x: int
        y: int = 0
        z: int = 0
        w: int = 0

    cls: Any = Wide if wide else Small
    made = maker(cls)(1, y=2)
    assert type(made) is cls and made == cls(1, y=2) and repr(made) == repr(cls(1, y=2))


def test_maker_needs_a_fast_init_class() -> None:
    plain, _ = _make()
    with pytest.raises(TypeError, match="fast_init"):
        maker(plain)


# -- the records' JSON form ------------------------------------------------------------------------

TEXT = st.text(max_size=6)
IDS = st.text("abcdef", min_size=1, max_size=3)
TIMES = st.floats(0, 2e9)
JSON_DATA = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
STEP_ERRORS = st.builds(StepError, kind=st.sampled_from(get_args(ErrorKind)), message=TEXT)


def step_results(step_id: st.SearchStrategy[str] = IDS) -> st.SearchStrategy[StepResult]:
    return st.builds(
        StepResult,
        id=step_id,
        tool=TEXT,
        status=st.sampled_from(get_args(StepStatus)),
        output=JSON_DATA,
        error=st.none() | STEP_ERRORS,
        attempts=st.integers(0, 5),
        started_at=st.none() | TIMES,
        ended_at=st.none() | TIMES,
        arguments=st.none() | st.dictionaries(TEXT, JSON_DATA, max_size=3),
        used_fallback=st.booleans(),
        warnings=st.lists(TEXT, max_size=2).map(tuple),
        reused=st.booleans(),
    )


ISSUES = st.builds(
    PlanIssue, code=TEXT, message=TEXT, step=st.none() | IDS, severity=st.sampled_from(["error", "warning"])
)
CHOICES = st.builds(
    Choice,
    group=TEXT,
    chosen=TEXT,
    strategy=TEXT,
    probability=st.floats(0, 1),
    candidates=st.lists(TEXT, max_size=3).map(tuple),
    step_id=IDS,
    reason=TEXT,
    general=st.none() | TEXT,
)


@st.composite
def plan_results(draw: st.DrawFn) -> PlanResult:
    ids = draw(st.lists(IDS, unique=True, max_size=5))
    steps = {sid: draw(step_results(st.just(sid))) for sid in ids}
    deps = {sid: tuple(draw(st.lists(st.sampled_from(ids), unique=True, max_size=2))) for sid in ids} if ids else {}
    return PlanResult(
        status=draw(st.sampled_from(["succeeded", "failed", "cancelled"])),
        steps=steps,
        output_steps=tuple(draw(st.lists(st.sampled_from(ids), unique=True))) if ids else (),
        run_id=draw(TEXT),
        dialect=draw(st.sampled_from(get_args(Dialect))),
        started_at=draw(TIMES),
        ended_at=draw(TIMES),
        deps=deps,
        warnings=tuple(draw(st.lists(ISSUES, max_size=2))),
        choices=tuple(draw(st.lists(CHOICES, max_size=2))),
    )


def _through_json_text(data: dict[str, Any]) -> Any:
    return json.loads(json.dumps(data))  # what the store, the service and the client carry


@given(step_results())
def test_a_step_result_reads_back_exactly_what_to_dict_wrote(record: StepResult) -> None:
    data = record.to_dict()
    assert list(data) == [f.name for f in dataclasses.fields(StepResult)]  # every field, none left out
    assert StepResult.from_dict(data) == record
    assert StepResult.from_dict(_through_json_text(data)) == record


@given(plan_results())
def test_a_plan_result_reads_back_exactly_what_to_dict_wrote(result: PlanResult) -> None:
    data = result.to_dict()
    assert {f.name for f in dataclasses.fields(PlanResult)} <= set(data)  # every field, and the derived facts
    assert PlanResult.from_dict(data) == result
    assert PlanResult.from_dict(_through_json_text(data)) == result


def test_from_dict_reads_the_forms_that_leave_keys_out() -> None:
    """The service's steps have no ``arguments``; a reader fills in each field's default."""
    assert StepResult.from_dict({"id": "a", "tool": "t", "status": "pending"}) == StepResult(
        id="a", tool="t", status="pending"
    )
    minimal = PlanResult.from_dict({"status": "failed", "steps": [{"id": "a", "tool": "t", "status": "skipped"}]})
    assert minimal == PlanResult(
        status="failed", steps={"a": StepResult(id="a", tool="t", status="skipped")}, output_steps=("a",)
    )
