"""``toolplan audit RUN_ID --db URL``: what a stored run declared against what it did."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .._errors import PlanValidationError, RunNotFoundError
from ._common import EXIT_FAILED, EXIT_OK, JsonOpt, ToolsOpt, db_option, fail, out, tools_of, with_store
from ._render import print_json, say

if TYPE_CHECKING:
    from ..policy import Declaration, Finding
    from ..store import Store

__all__ = ("audit_command",)


def _declared(path: Path | None) -> Declaration | None:
    if path is None:
        return None
    from ..policy import parse_declaration

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"Cannot read the declared plan {str(path)!r}: {exc}. Pass --declared with a JSON file.")
    try:
        return parse_declaration(text)
    except PlanValidationError as exc:
        fail(" ".join(exc.message.split()))


async def _audit(store: Store, run_id: str, declared: Declaration | None, tools: Any) -> list[dict[str, Any]]:
    """Findings per run: the run itself, or (an agent run's id) each plan it ran.

    An agent run that declared its plan (``declare_plan``, kept in the store) is audited as one:
    its declarations against every plan it ran, unless ``--declared`` gives another. A replanned
    run (declarations naming the plan they replace) has each call judged against the declaration
    in force when it was made; the chain of declarations comes back under ``"declarations"``, each
    with its execution state.
    """
    from ..policy import (
        audit,
        audit_chain,
        chain_traces,
        declaration_of,
        execution_state,
        parse_declaration,
        plan_chain,
        trace_of,
    )

    try:
        infos = [await store.get_run(run_id)]
    except RunNotFoundError:
        children = [s for s in await store.list_runs(limit=10_000) if s.parent_id == run_id]
        stored = await store.timed_declarations(run_id)
        if not children and not stored:
            raise
        infos = [await store.get_run(s.run_id) for s in sorted(children, key=lambda s: s.created_at)]
        if stored and declared is None:  # the agent's own declarations, against all it ran
            events = [e for info in infos for e in await store.events(info.summary.run_id)]
            trace = trace_of([info.result for info in infos], events=events)
            declarations = [replace(parse_declaration(body), declared_at=at) for at, body in stored]
            findings: list[Finding] = audit_chain(declarations, trace, tools=tools)
            chain = plan_chain(declarations)
            plans = [
                {
                    "plan_id": d.plan_id,
                    "replaces": d.replaces,
                    "declared_at": d.declared_at,
                    "calls": len(d.calls),
                    "execution_state": execution_state(d, part).to_dict(),
                }
                for d, part in zip(chain, chain_traces(chain, trace), strict=True)
            ]
            status = "declared" if not infos else infos[-1].summary.status
            return [
                {"run_id": run_id, "status": status, "findings": [f.to_dict() for f in findings], "declarations": plans}
            ]
    out = []
    for info in infos:
        rid = info.summary.run_id
        trace = trace_of(info.result, events=await store.events(rid))
        findings = audit(declared or declaration_of(info.plan), trace, tools=tools)
        out.append({"run_id": rid, "status": info.summary.status, "findings": [f.to_dict() for f in findings]})
    return out


def audit_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="A stored run's id, or an agent run's id.")],
    db: Annotated[str | None, db_option("The database the run is stored in.")] = None,
    as_json: JsonOpt = False,
    declared: Annotated[
        Path | None,
        typer.Option(
            "--declared",
            metavar="FILE.json",
            help="Audit against this declared plan (ToolCallPlan) instead of the run's own plan "
            "(its goal, budget, policy and each step's rationale).",
        ),
    ] = None,
    tools: ToolsOpt = None,
) -> NoReturn:
    """Compare what a stored run declared with what it did: budget exceeded, plan deviations, BLP and policy violations.

    An agent run's id audits each plan it ran; an agent run that declared its plan (declare_plan,
    kept in the store) is audited against its declarations: the chain of replans is listed, each
    with its execution state, and each call is judged against the plan in force when it was made.
    --tools prices the calls (max_cost) and shows tool groups.
    Exit code 0 when there is no finding, 1 when there are findings, 2 when the run is not found.
    """
    declaration = _declared(declared)
    registry = None
    if tools is not None:
        registry = tools_of(tools)
    runs = with_store(db, lambda store: _audit(store, run_id, declaration, registry))
    count = sum(len(r["findings"]) for r in runs)
    if as_json:
        print_json(out, {"run_id": run_id, "findings": count, "runs": runs})
        raise typer.Exit(EXIT_FAILED if count else EXIT_OK)
    for r in runs:
        found = r["findings"]
        say(
            out,
            f"Run {r['run_id']} ({r['status']}): {len(found) or 'no'} finding{'s' if len(found) != 1 else ''}.",
            "bold",
        )
        for p in r.get("declarations", ()):
            state = p["execution_state"]
            said = state["state"] + (f" ({state['completed']} completed)" if state["state"] == "InProgress" else "")
            said += f": {state['reason']}" if state.get("reason") else ""
            replaces = f", replaces {p['replaces']}" if p["replaces"] else ""
            calls = f"{p['calls']} call{'s' if p['calls'] != 1 else ''}"
            say(out, f"  Declared plan {p['plan_id']}{replaces} ({calls}): {said}")
        for f in found:
            where = f" [{f['step']}]" if f["step"] else ""
            plan = f" (plan {f['plan_id']})" if f.get("plan_id") else ""
            say(out, f"  {f['kind']} {f['code']}{where}{plan}: {f['message']}")
    raise typer.Exit(EXIT_FAILED if count else EXIT_OK)
