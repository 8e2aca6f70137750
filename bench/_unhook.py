"""The engine with its durable-store hook taken out: what `bench.tracing`'s ``store_unhooked`` phase runs.

A run without a store asks, per step, whether it has one: ``run.journal is None`` before a call,
``self.journal is not None`` after a step, ``run.stored is not None`` (a resumed run) before one.
These questions are attribute tests written inline in the engine, so there is no function to swap
out (as the tracing hook's ``get_tracer`` is). `unhook_store` recompiles the engine's modules from
their own source with each such test replaced by the answer a run without a store gets (``True``
or ``False``), which CPython's compiler folds away with the branch it guards, and gives the engine's
functions that code. What is left is the same engine that never asks: "off" minus it is what the
hook costs a run that has no store.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

# The engine's modules that ask about the store on a run's path (toolplan.execute).
MODULES = ("_api", "_run", "_step", "_share", "_gate")
# The names a store question tests: ``x.journal``, ``x.stored`` and, in `run_compiled`, ``store``.
ATTRIBUTES = frozenset({"journal", "stored"})
NAMES = frozenset({"store"})
# The per-step questions: the unhooking must find each one, or it would measure nothing.
PER_STEP = frozenset({"run_step", "PlanRun._work"})


class _Fold(ast.NodeTransformer):
    """``<journal/stored/store> is None`` -> True, ``... is not None`` -> False; counts them per function."""

    def __init__(self) -> None:
        self.where: list[str] = []
        self.folded: dict[str, int] = {}

    def _scoped(self, node: Any) -> Any:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Is | ast.IsNot):
            return node
        right = node.comparators[0]
        if not (isinstance(right, ast.Constant) and right.value is None and _asks_store(node.left)):
            return node
        name = ".".join(self.where)
        self.folded[name] = self.folded.get(name, 0) + 1
        return ast.copy_location(ast.Constant(value=isinstance(node.ops[0], ast.Is)), node)


def _asks_store(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Attribute):
        return expr.attr in ATTRIBUTES
    return isinstance(expr, ast.Name) and expr.id in NAMES


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(module: types.ModuleType) -> Iterator[types.FunctionType]:
    """The module's own functions and its classes' methods (unwrapped)."""
    for obj in vars(module).values():
        members = vars(obj).values() if inspect.isclass(obj) and obj.__module__ == module.__name__ else [obj]
        for member in members:
            fn = getattr(member, "__func__", getattr(member, "fget", member))
            fn = inspect.unwrap(fn) if callable(fn) else fn
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
                yield fn


def unhook_store() -> tuple[dict[str, int], Callable[[], None]]:
    """Take the store's questions out of the engine; return what was folded (per function) and an undo.

    Raises:
        RuntimeError: a per-step question was not found (the engine changed: update `MODULES`,
            `ATTRIBUTES` or `NAMES`), so the phase would not measure the hook.
    """
    folded: dict[str, int] = {}
    saved: list[tuple[types.FunctionType, types.CodeType]] = []
    replaced: set[str] = set()
    for short in MODULES:
        module = importlib.import_module(f"toolplan.execute.{short}")
        fold = _Fold()
        tree = fold.visit(ast.parse(inspect.getsource(module)))
        if not fold.folded:
            continue
        compiled = compile(ast.fix_missing_locations(tree), inspect.getfile(module), "exec")
        new = {c.co_qualname: c for c in _codes(compiled)}
        for fn in _functions(module):
            name = fn.__code__.co_qualname
            code = new.get(name)
            if code is not None and any(key == name or key.startswith(f"{name}.") for key in fold.folded):
                saved.append((fn, fn.__code__))  # (a nested function's question goes with its parent's code)
                fn.__code__ = code
                replaced.add(name)
        folded.update({f"{short}.{name}": n for name, n in fold.folded.items()})
    missing = PER_STEP - replaced
    if missing:
        raise RuntimeError(f"the store's per-step questions were not found in {sorted(missing)}: update {__file__}")

    def undo() -> None:
        for fn, code in saved:
            fn.__code__ = code

    return folded, undo
