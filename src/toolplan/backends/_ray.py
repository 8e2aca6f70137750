"""`RayBackend`: tool calls (and code mode's sandbox, `RayCodeRunner`) run on a Ray cluster; the rest stays here.

The scheduler (references, fail-forward, budgets, limits, timeouts, retries, fallbacks, events, the
store) runs in the driver exactly as with the in-process backend. This backend only moves one call's
body: the tool is shipped to the workers once (``ray.put``), each call sends the function name, the
resolved arguments and the call context, and the worker sends back the `ToolResult` or the exception
the tool raised, which the executor then handles as it would locally.

- I/O-bound tools run on a small pool of async actors, each holding the tools it was sent and
  running many calls at once; CPU-bound tools (``cpu_tools``) run as Ray tasks, one CPU each.
- Ray's own retries are off (actors ``max_restarts=0, max_task_retries=0``, tasks
  ``max_retries=0``): Ray would re-run a call whose worker died, repeating its side effect. toolplan
  retries, because only it knows which tools are read-only or idempotent.
- A worker that dies mid-call raises `WorkerDiedError`: a read-only or idempotent tool's call fails
  as ``infrastructure`` (retried per the tool's retry policy, same idempotency key); any other
  tool's step ends with error kind ``unknown_outcome`` and is never called again by toolplan.
- A timeout or cancellation reaches the remote call with ``ray.cancel``: an async tool's coroutine is
  cancelled on the actor; a sync tool's thread, like locally, runs on to its end and its result is
  discarded.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

# Private use (marked): the worker sets the call context the same way the in-process backend does.
from .._context import _CURRENT, CallContext, raw_call
from .._errors import SandboxError, UserError, WorkerDiedError
from ..sandbox import CodeLimits, CodeResult, CodeRunner, ToolCaller
from ..tools import Tool, ToolAnnotations, ToolResult
from ._code_host import CodeHost
from ._ray_code import WorkerGone, drive
from ._ray_errors import dead_worker_errors, import_ray

__all__ = ("RayBackend", "RayCodeRunner")

# What travels with a call: run id, step id, tool, attempt, seconds left (None: no deadline), fallback link,
# and the W3C trace headers of the call's span (None: not traced).
# Seconds left, not the deadline: `time.monotonic` means nothing on another machine.
_Wire = tuple[str, str, str, int, float | None, int, dict[str, str] | None]
# One call as it travels: the tool's key, [its ObjectRef] (None once the actor has it), the function name,
# the arguments and the wire. One argument, not five: Ray serializes each argument of a call on its own.
_Call = tuple[str, list[Any] | None, str, dict[str, Any], _Wire]
# What comes back: (True, content, error) of a ToolResult (a tuple pickles several times faster than the
# dataclass), (False, the exception the tool raised, None), or (None, whatever else the tool returned, None).
_Outcome = tuple[bool | None, Any, str | None]
_LOCAL_ONLY = ("num_cpus", "num_gpus", "include_dashboard")  # ray.init options for a cluster it starts
_CLI_MODULES = "_toolplan_cli_tools_"  # the names `toolplan run --tools FILE.py` gives the files it loads


async def _run_call(tool: Tool, name: str, arguments: Mapping[str, Any], wire: _Wire) -> _Outcome:
    """On a worker: run the call under its call context; see `_Outcome` for what comes back."""
    run_id, step_id, tool_name, attempt, remaining, fallback, headers = wire
    deadline = None if remaining is None else time.monotonic() + remaining
    token = _CURRENT.set(raw_call(None, run_id, step_id, tool_name, attempt, deadline, fallback))
    traced = _attach_trace(headers) if headers else None
    try:
        result = await tool.execute(name, arguments)
    except (Exception, SystemExit) as exc:  # sent back and handled by the driver as a local failure
        return False, _sendable(exc), None
    else:
        if type(result) is ToolResult:
            return True, result.content, result.error
        return None, result, None
    finally:
        if traced is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(traced)
        _CURRENT.reset(token)


def _attach_trace(headers: Mapping[str, str]) -> Any:  # a context token of opentelemetry
    """Make the driver's call span the parent of the spans the tool starts on this worker."""
    from opentelemetry import context as otel_context
    from opentelemetry import propagate

    return otel_context.attach(propagate.extract(headers))


def _sendable(exc: BaseException) -> BaseException:
    """``exc``, or an exception of the same class name and message when ``exc`` cannot be pickled."""
    ray = import_ray()
    try:
        ray.cloudpickle.loads(ray.cloudpickle.dumps(exc))
    except Exception:
        stand_in: BaseException = type(type(exc).__name__, (Exception,), {})(str(exc))
        return stand_in
    return exc


class _ToolActor(CodeHost):
    """An async actor: keeps the tools it was sent and runs many calls at once; hosts code runs too."""

    def __init__(self) -> None:
        super().__init__()
        self._tools: dict[str, asyncio.Future[Tool]] = {}

    def pid(self) -> int:
        return os.getpid()

    async def call(self, payload: _Call) -> Any:
        key, holder, name, arguments, wire = payload
        # The driver sends a tool's reference with the first call to this actor only (a nested ObjectRef
        # costs a borrower round trip per call); calls that follow wait for that first load if needed.
        loading = self._tools.get(key)
        if loading is None:
            loading = self._tools[key] = asyncio.get_running_loop().create_future()
        if holder is not None and not loading.done():
            try:
                loading.set_result(await holder[0])  # the ObjectRef, sent in a list so Ray does not resolve it
            except Exception as exc:  # the calls waiting for it fail alike
                if not loading.done():
                    loading.set_exception(exc)
                raise
        tool = await asyncio.shield(loading)
        return await _run_call(tool, name, arguments, wire)


_TASK_TOOLS: dict[str, Tool] = {}  # in each task worker process: the tools it has loaded


def _task_call(payload: _Call) -> Any:
    """A Ray task: one CPU-bound call in a worker process (the tool is loaded once per process)."""
    key, holder, name, arguments, wire = payload
    tool = _TASK_TOOLS.get(key)
    if tool is None:
        assert holder is not None
        tool = _TASK_TOOLS[key] = import_ray().get(holder[0])
    return asyncio.run(_run_call(tool, name, arguments, wire))


class RayBackend:
    """Runs tool calls on a Ray cluster: I/O-bound tools on async actors, CPU-bound ones as tasks.

    Pass it where a backend is taken: ``execute_plan(plan, tools, backend=RayBackend())``,
    ``Agent(..., backend=...)``, ``toolplan run --backend ray``. Call `start` before the first plan
    (connecting to a cluster, or starting a local one, takes seconds), and `close` at the end (or use
    it as a context manager).

    Args:
        address: The cluster to join (``"ray://host:10001"``, ``"host:6379"``, ``"auto"``); None starts
            a local cluster in this process (or uses the one ``ray.init`` already started).
        actors: How many async actors run the I/O-bound calls (each runs up to ``max_concurrency`` calls).
        max_concurrency: Calls at once per actor.
        cpu_tools: Names of tools that are CPU-bound: each call runs as a Ray task with ``num_cpus`` CPUs.
        num_cpus: CPUs a CPU-bound call reserves.
        init_options: More keyword arguments for ``ray.init`` (``runtime_env``, ...); ``num_cpus`` and
            ``num_gpus`` size a local cluster and are left out when joining one (``address`` or ``RAY_ADDRESS``).
        code_on_workers: Code mode's sandbox runs on a worker (an actor) when an `Agent` with
            ``code_execution`` is given this backend; False keeps it in the driver (its tool calls still
            come here). See `code_runner`.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int = 2,
        max_concurrency: int = 1000,
        cpu_tools: Collection[str] = (),
        num_cpus: float = 1,
        init_options: Mapping[str, Any] | None = None,
        code_on_workers: bool = True,
    ) -> None:
        if actors < 1:
            raise UserError(f"RayBackend needs at least one actor, got actors={actors}.")
        if max_concurrency < 1:
            raise UserError(f"RayBackend max_concurrency must be >= 1, got {max_concurrency}.")
        if isinstance(cpu_tools, str):
            raise UserError("RayBackend cpu_tools takes a list of tool names, not one string: cpu_tools=[name].")
        self.address = address
        self.actors = actors
        self.max_concurrency = max_concurrency
        self.cpu_tools = frozenset(cpu_tools)
        self.num_cpus = num_cpus
        self.init_options = dict(init_options or {})
        self.code_on_workers = code_on_workers
        self._lock = threading.Lock()
        self._pool: list[Any] | None = None
        self._next = itertools.count()
        self._task: Any = None
        self._ray: Any = None  # the ray module, once started (importlib per call costs a lookup)
        self._owns_ray = False
        self._prefix = uuid.uuid4().hex[:12]
        self._shipped: dict[int, tuple[Tool, str, list[Any]]] = {}  # id(tool) -> (tool kept alive, key, [ref])
        self._safe: dict[tuple[int, str], bool] = {}
        self._sent: dict[int, set[str]] = {}  # id(actor) -> keys of the tools it was sent

    def __repr__(self) -> str:
        return f"RayBackend(address={self.address!r}, actors={self.actors}, cpu_tools={sorted(self.cpu_tools)!r})"

    # -- life cycle -------------------------------------------------------------------------------

    def start(self) -> RayBackend:
        """Connect to the cluster (or start a local one) and start the actors; does nothing the second time."""
        with self._lock:
            if self._pool is not None:
                return self
            ray = self._ray = import_ray()
            if not ray.is_initialized():
                options: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False, **self.init_options}
                if self.address is not None or os.environ.get("RAY_ADDRESS"):
                    # Joining a running cluster: the sizes of a local one do not apply (ray.init refuses them).
                    for name in _LOCAL_ONLY:
                        options.pop(name, None)
                ray.init(address=self.address, **options)
                self._owns_ray = True
            actor_class = ray.remote(_ToolActor).options(
                max_restarts=0, max_task_retries=0, max_concurrency=self.max_concurrency, num_cpus=0
            )
            self._task = ray.remote(_task_call).options(max_retries=0, retry_exceptions=False, num_cpus=self.num_cpus)
            self._pool = [actor_class.remote() for _ in range(self.actors)]
            return self

    def close(self) -> None:
        """Stop the actors, and the local cluster if `start` started it."""
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is None:
                return
            ray = import_ray()
            for actor in pool:
                ray.kill(actor, no_restart=True)
            self._shipped.clear()
            self._sent.clear()
            if self._owns_ray:
                ray.shutdown()
                self._owns_ray = False

    def __enter__(self) -> RayBackend:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def actor_pids(self) -> list[int]:
        """The process ids of the actors (for tests and diagnostics)."""
        ray = import_ray()
        return [ray.get(actor.pid.remote()) for actor in self.start()._pool or []]

    def code_runner(self, runner: CodeRunner) -> CodeRunner:
        """``runner`` run on this cluster's workers: the sandbox on an actor, its tool calls served here.

        ``Agent(..., code_execution=runner, backend=backend)`` does this itself unless
        ``code_on_workers=False``. A runner that already runs on Ray is returned as it is.
        """
        return runner if isinstance(runner, RayCodeRunner) else RayCodeRunner(runner, self)

    def _next_actor(self) -> Any:
        """The actor for the next call or code run: round robin over the pool."""
        pool = self._pool
        assert pool is not None
        return pool[next(self._next) % len(pool)]

    # -- the seam ---------------------------------------------------------------------------------

    async def invoke(self, tool: Tool, name: str, arguments: Mapping[str, Any], call: CallContext) -> ToolResult:
        """Run the call on the cluster; return its result or raise what the tool raised."""
        if self._pool is None:
            await asyncio.to_thread(self.start)
        ray = self._ray
        key, holder = self._ship(ray, tool)
        headers = dict(call.trace_context) if call.trace_context else None
        wire: _Wire = (call.run_id, call.step_id, call.tool, call.attempt, call.remaining(), call.fallback, headers)
        actor = None
        if name in self.cpu_tools:
            ref = self._task.remote((key, holder, name, dict(arguments), wire))
        else:
            actor = self._next_actor()
            sent = self._sent.setdefault(id(actor), set())
            first = key not in sent
            sent.add(key)
            ref = actor.call.remote((key, holder if first else None, name, dict(arguments), wire))
        try:
            ok, value, error = await ref
        except asyncio.CancelledError:  # a timeout, fail-fast or the caller: stop the remote call too
            ray.cancel(ref, recursive=True)
            raise
        except dead_worker_errors(ray) as exc:
            if actor is not None:
                self._replace(ray, actor)
            raise self._died(tool, name, call, exc) from None
        if ok:
            return ToolResult(value, error)
        if ok is None:
            return value  # type: ignore[no-any-return]  # what the tool returned, as in process
        raise value

    def _ship(self, ray: Any, tool: Tool) -> tuple[str, list[Any]]:
        """The key and object-store reference of ``tool``, put in the object store the first time."""
        shipped = self._shipped.get(id(tool))
        if shipped is not None:
            return shipped[1], shipped[2]
        module = sys.modules.get(getattr(getattr(tool, "function", None), "__module__", None) or "")
        if module is not None and module.__name__.startswith(_CLI_MODULES):
            # A tools file the CLI loaded by path: the workers cannot import it by name, so it travels by value.
            ray.cloudpickle.register_pickle_by_value(module)
        try:
            ref = ray.put(tool)
        except Exception as exc:
            raise UserError(
                f"{type(tool).__name__} cannot be sent to Ray workers ({type(exc).__name__}: {exc}). Define tools "
                "at module level in an importable module, without open connections or locks in their state."
            ) from None
        key = f"{self._prefix}-{len(self._shipped)}"
        self._shipped[id(tool)] = (tool, key, [ref])
        return key, [ref]

    def _replace(self, ray: Any, dead: Any) -> None:
        """Put a new actor in the dead one's place (the calls it ran have failed already)."""
        with self._lock:
            pool = self._pool
            if pool is None:
                return
            self._sent.pop(id(dead), None)
            for i, actor in enumerate(pool):
                if actor is dead:
                    pool[i] = (
                        ray.remote(_ToolActor)
                        .options(max_restarts=0, max_task_retries=0, max_concurrency=self.max_concurrency, num_cpus=0)
                        .remote()
                    )

    def _died(self, tool: Tool, name: str, call: CallContext, exc: BaseException) -> WorkerDiedError:
        safe = self._safe.get((id(tool), name))
        if safe is None:
            annotations = next((d.annotations for d in tool.definitions() if d.name == name), ToolAnnotations())
            safe = self._safe[(id(tool), name)] = annotations.read_only or annotations.idempotent
        what = f"The Ray worker running tool {name!r} (step {call.step_id!r}, attempt {call.attempt}) died mid-call"
        why = f" ({type(exc).__name__})"
        if safe:
            message = (
                f"{what}{why}. {name!r} is read-only or idempotent, so toolplan may call it again with the same "
                f"idempotency key {call.idempotency_key!r}. If workers keep dying, check the cluster's logs "
                "(running out of memory is the usual cause)."
            )
        else:
            message = (
                f"{what}{why}, so whether that call had its effect is unknown. {name!r} is not marked read_only or "
                f"idempotent, so toolplan did not call it again. Check the outside system for idempotency key "
                f"{call.idempotency_key!r} before running the step again; the cluster's logs say why the worker died."
            )
        return WorkerDiedError(message, tool=name, outcome_unknown=not safe)


class _RayChannel:
    """One actor of a `RayBackend`, holding the run."""

    def __init__(self, backend: RayBackend, ray: Any, actor: Any) -> None:
        self.backend, self.ray, self.actor = backend, ray, actor
        self.where = "Ray worker"
        self._dead = dead_worker_errors(ray)

    async def _await(self, ref: Any) -> Any:
        try:
            return await ref
        except asyncio.CancelledError:
            self.ray.cancel(ref)
            raise
        except self._dead as exc:
            self.backend._replace(self.ray, self.actor)
            raise WorkerGone(type(exc).__name__) from None

    async def start(self, run_id: str, runner: CodeRunner, code: str, limits: CodeLimits) -> None:
        try:
            ref = self.actor.code_start.remote(run_id, runner, code, limits)
        except Exception as exc:  # the runner could not be pickled
            raise SandboxError(
                f"{type(runner).__name__} cannot be sent to a Ray worker ({type(exc).__name__}: {exc}). Pass a "
                "runner without open resources in its state, or RayBackend(code_on_workers=False)."
            ) from None
        await self._await(ref)

    async def next_events(self, run_id: str) -> list[bytes]:
        return await self._await(self.actor.code_next_events.remote(run_id))  # type: ignore[no-any-return]

    async def answer(self, run_id: str, call_id: int, ok: bool, text: str) -> None:
        await self._await(self.actor.code_answer.remote(run_id, call_id, ok, text))

    def cancel(self, run_id: str) -> None:
        self.actor.code_cancel.remote(run_id)  # delivered in order after the calls already sent


class RayCodeRunner:
    """Runs another `CodeRunner` on a Ray worker; the code's tool calls are served in the driver.

    ``Agent(..., code_execution=SubprocessRunner(), backend=RayBackend())`` uses it by default
    (``RayBackend(code_on_workers=False)`` keeps the sandbox in the driver); build one explicitly with
    ``backend.code_runner(runner)`` to run code on workers elsewhere, e.g. a `CodeTool`.

    A worker that dies mid-run ends the run as a failed `CodeResult` (the tool calls the code had made
    stand: run it again only if repeating them is safe). Cancelling the run (a timeout, the agent run's
    deadline, fail-fast) cancels it on the worker, which kills the sandbox there.

    Args:
        runner: The runner to run on the worker, with its own confinement and limits.
        backend: The `RayBackend` whose cluster and actors run it.
    """

    def __init__(self, runner: CodeRunner, backend: RayBackend) -> None:
        self.runner = runner
        self.backend = backend
        self.name = runner.name

    @property
    def limits(self) -> CodeLimits | None:
        """The inner runner's default limits (code mode cuts their wall time to a run's deadline)."""
        limits = getattr(self.runner, "limits", None)
        return limits if isinstance(limits, CodeLimits) else None

    def __repr__(self) -> str:
        return f"RayCodeRunner({self.runner!r}, {self.backend!r})"

    def describe(self) -> str:
        """The inner runner's description: where the code runs changes nothing the model can use."""
        return self.runner.describe()

    async def run(self, code: str, *, call_tool: ToolCaller, limits: CodeLimits | None = None) -> CodeResult:
        """Run ``code`` with the inner runner on a Ray worker; see `CodeRunner.run`.

        Raises:
            SandboxError: The sandbox could not be started on the worker.
        """
        backend = self.backend
        if backend._pool is None:
            await asyncio.to_thread(backend.start)
        channel = _RayChannel(backend, backend._ray, backend._next_actor())
        return await drive(channel, self.runner, code, call_tool=call_tool, limits=limits or self.limits)
