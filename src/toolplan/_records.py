"""Cheaper construction of frozen, slotted dataclasses: the plan IR and the records of a run.

The ``__init__`` that ``@dataclass(frozen=True)`` generates stores every field with
``object.__setattr__`` (the class's own ``__setattr__`` refuses): a call per field, paid for every
`Step`, `StepResult` and call record of every plan. `fast_init` swaps in an ``__init__`` with the
same signature, defaults, default factories and ``__post_init__`` call that gives the new object,
for the stores only, a private twin class with the same slots and the ordinary ``__setattr__``.
The stores are then plain attribute assignments, which CPython specialises to direct slot stores,
and the object gets its class back before ``__post_init__`` runs. A `StepResult` costs about a
third less to build (cachegrind: 15.8k instructions before, 11.0k after; a mutable dataclass 9.3k).
Records of fewer than four fields store through the slot descriptors instead (about 40% cheaper
than ``object.__setattr__``), where two class changes would cost more than they save. Instances of
subclasses take the dataclass's own ``__init__``. The class stays exactly as frozen.

Calling a class is itself costly in CPython 3.11: it builds an argument tuple and a dict of the
keywords and makes two calls before ``__init__`` runs. `maker` gives, for each `fast_init` class, a
plain function with the same parameters that makes the object as a twin and changes its class once:
4.7k instructions for a `StepResult` instead of 10.6k, 2.6k for a one-field node instead of 3.2k
(cachegrind, ``PYTHONHASHSEED=0``). The engine uses makers wherever it makes a record per step.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

__all__ = ("fast_init", "maker", "positional_maker")

T = TypeVar("T")
P = ParamSpec("P")


class _Factory:
    """The default shown for a field with a default factory (as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Factory()


_set_class = object.__dict__["__class__"].__set__
_SWAP_MIN_FIELDS = 4  # below this, two class changes in __init__ cost more than the stores they speed up
_MAKERS: dict[Any, Callable[..., Any]] = {}  # fast_init class -> its maker
_POSITIONAL: set[Any] = set()  # fast_init classes whose maker takes every field by position too


def _twin(cls: type) -> type:
    """A plain class with the same slots as ``cls``, so an object can move between the two.

    CPython allows assigning ``__class__`` between classes with the same base and the same slots
    in the same order; stores to an object of the twin are direct slot stores.
    """
    if cls.__bases__ != (object,):
        raise TypeError(f"fast_init needs a dataclass without base classes; {cls.__name__} has some.")
    twin = type(f"_{cls.__name__}Init", (), {"__slots__": cls.__dict__["__slots__"], "__module__": cls.__module__})
    probe: Any = object.__new__(cls)
    _set_class(probe, twin)  # raises TypeError if the layouts differ
    _set_class(probe, cls)
    return twin


def fast_init(cls: type[T]) -> type[T]:
    """Give the frozen, slotted dataclass ``cls`` a faster ``__init__`` (apply above ``@dataclass``).

    It also builds the class's `maker`, for code that makes many records.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init needs a frozen, slotted dataclass; {cls.__name__} is not one.")
    namespace: dict[str, Any] = {"_MISSING": _FACTORY, "_cls": cls, "_dataclass_init": cls.__init__}
    fields = dataclasses.fields(cast(Any, cls))
    expected = [f.name for f in fields]
    if list(inspect.signature(cls).parameters) != expected or not all(f.init for f in fields):
        raise TypeError(f"fast_init does not support {cls.__name__}: an init=False field or an InitVar.")
    positional: list[str] = []
    keyword: list[str] = []
    factories: list[str] = []
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = f.default
            param = f"{name}=_default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            param = f"{name}=_MISSING"
            factories.append(f"    if {name} is _MISSING:\n        {name} = _factory_{name}()\n")
        else:
            param = name
        (keyword if f.kw_only else positional).append(param)
    names = [f.name for f in fields]
    namespace["_twin"] = _twin(cls)
    params_text = ", ".join([*positional, *(["*", *keyword] if keyword else [])])
    stores = "".join(f"    self.{n} = {n}\n" for n in names)  # on the twin: plain slot stores
    post_init = "    self.__post_init__()\n" if hasattr(cls, "__post_init__") else ""
    source = f"def __init__(self{', ' if params_text else ''}{params_text}):\n" + "".join(factories)
    if len(names) >= _SWAP_MIN_FIELDS:
        namespace["_set_class"] = _set_class
        source += (
            "    if type(self) is not _cls:  # a subclass: its layout may differ\n"
            f"        return _dataclass_init(self, {', '.join(f'{n}={n}' for n in names)})\n"
            "    _set_class(self, _twin)\n" + stores + "    self.__class__ = _cls\n"
        )
    else:  # too few fields to repay two class changes: store through the slots' own descriptors
        for n in names:
            namespace[f"_set_{n}"] = cls.__dict__[n].__set__
        source += "".join(f"    _set_{n}(self, {n})\n" for n in names) or "    pass\n"
    # The maker takes keyword-only fields as ordinary parameters where their order allows it (no
    # required one after one with a default): a field left out then takes its default from the
    # function's tuple of defaults, not from a dict lookup per field (about 250 instructions each).
    # Its callers name every argument all the same (its type is the class's signature).
    # When every field is keyword-only, no caller depends on the order: the required ones go first.
    ordered = [*positional, *keyword]
    defaulted = [("=" in p) for p in ordered]
    plain = all(d or not any(defaulted[:i]) for i, d in enumerate(defaulted))
    make_params = ordered if plain else params_text.split(", ")
    if not plain and not positional:
        make_params = [p for p in keyword if "=" not in p] + [p for p in keyword if "=" in p]
    # The maker makes the object as a twin: one class change, whatever the number of fields.
    source += (
        post_init
        + f"def make({', '.join(make_params)}):\n"
        + "".join(factories)
        + "    self = _twin()\n"
        + stores
        + "    self.__class__ = _cls\n"
        + post_init
        + "    return self\n"
    )
    exec(source, namespace)  # the same technique dataclasses itself uses to build __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__module__ = cls.__module__
    make.__doc__ = f"A new `{cls.__name__}`, as ``{cls.__name__}(...)`` makes it, for less."
    _MAKERS[cls] = make
    if plain:
        _POSITIONAL.add(cls)
    return cls


def maker(cls: Callable[P, T]) -> Callable[P, T]:
    """A function that makes records of the `fast_init` class ``cls``, taking the same arguments.

    Calling a class costs CPython a tuple, a dict of the keywords and two calls before ``__init__``
    runs; calling this function costs one call. Use it where a plan makes a record per step.
    """
    made = _MAKERS.get(cls)
    if made is None:
        raise TypeError(f"maker needs a class decorated with @fast_init; {cls!r} is not one.")
    return cast(Callable[P, T], made)


def positional_maker(cls: Callable[..., T]) -> Callable[..., T]:
    """The `maker` of ``cls``, to call with its fields by position, in the order the class declares them.

    CPython 3.11 matches each keyword argument against the parameters' names; positions cost less
    (about 45 instructions a field). Fields left out at the end take their defaults. For the few
    records made on every step; elsewhere name the fields (`maker`), which type checkers follow.
    """
    if cls not in _POSITIONAL:
        raise TypeError(f"positional_maker needs a fast_init class whose defaulted fields come last; {cls!r} is not.")
    return _MAKERS[cls]
