// toolplan's live page: one execution's plan (a DAG laid out by dagre), step table and timeline,
// kept up to date from the planner service's event stream. The same page follows a local
// `toolplan run --ui` (its server answers the same routes with the same JSON).
//
// Routes (relative to the page's /ui/executions/{id}): GET /v1/executions/{id}/graph (steps and
// dependencies), GET /v1/executions/{id} (the step table with outputs and errors) and
// GET /v1/executions/{id}/events (server-sent events {"seq","type","step_id","payload","at"};
// reconnects with Last-Event-ID). Every call sends the key in X-API-Key, so the stream is read with
// fetch() rather than EventSource (which cannot send headers). A step that waits for approval has
// Approve and Reject buttons: POST /v1/executions/{id}/approvals with the page's key.
(() => {
  "use strict";

  const FINISHED_STEP = new Set(["succeeded", "failed", "timed_out", "cancelled", "skipped", "not_run", "unknown_outcome", "rejected"]);
  const FINISHED_PLAN = new Set(["succeeded", "failed", "cancelled"]);
  const LEGEND = [
    ["pending", "pending"], ["running", "running"], ["succeeded", "succeeded"], ["failed", "failed / timed out"],
    ["cancelled", "cancelled"], ["skipped", "skipped / not run"],
  ];
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_H = 46;

  const $ = (id) => document.getElementById(id);
  const where = location.pathname.match(/^(.*)\/ui\/executions\/([^/]+)\/?$/);
  const prefix = where ? where[1] : "";
  const execId = where ? decodeURIComponent(where[2]) : "";
  const api = `${prefix}/v1/executions/${encodeURIComponent(execId)}`;

  const state = {
    order: [], // step ids in plan order
    steps: new Map(), // id -> {id, tool, deps, status, attempts, started, ended, output, hasOutput, error, retrying, fallback}
    outputSteps: new Set(),
    status: "loading",
    createdAt: null, // queued (service) or page server started (CLI)
    startedAt: null, // the plan_started event
    endedAt: null,
    lastSeq: 0,
    done: false, // the execution has ended (from its events or its view)
    sawEnd: false, // the stream's plan_finished has arrived
    selected: null,
    layout: null,
    approval: null, // what the execution waits for (its view's approval), or null
    reasons: new Map(), // step id -> the rejection reason being typed
  };
  let key = "";

  // ---------------------------------------------------------------- the key (key.js)

  toolplanKey.onEntry((value) => {
    key = value;
    $("key-form").hidden = true;
    $("views").hidden = false;
    start();
  });

  // ---------------------------------------------------------------- the API

  class ApiProblem extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function problemOf(response) {
    let body = null;
    try { body = await response.json(); } catch (_) { /* not JSON */ }
    const message = body && body.message ? body.message : `The server answered ${response.status}.`;
    return new ApiProblem(response.status, body && body.code, message);
  }

  async function getJSON(url) {
    const response = await fetch(url, { headers: { "X-API-Key": key }, cache: "no-store" });
    if (!response.ok) throw await problemOf(response);
    return response.json();
  }

  // Server-sent events from a fetch() body: calls onRecord with each event's parsed data.
  async function readEvents(body, onRecord) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        if (!match || (match[0] === "\r" && match.index === buffer.length - 1)) break; // "\r" may precede "\n"
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (data.length) onRecord(JSON.parse(data.join("\n")));
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        } // id:, event:, retry: and comments: the data holds seq and type
      }
    }
  }

  // Reads the event stream until the plan's end is in it (reconnecting after a drop, with
  // Last-Event-ID), even when the execution had ended before the page opened: the events carry the
  // plan's start and end times.
  async function follow() {
    for (;;) {
      try {
        const headers = { "X-API-Key": key, Accept: "text/event-stream" };
        if (state.lastSeq) headers["Last-Event-ID"] = String(state.lastSeq);
        const response = await fetch(`${api}/events`, { headers, cache: "no-store" });
        if (!response.ok) throw await problemOf(response);
        setConnection("live");
        await readEvents(response.body, onRecord);
        if (state.sawEnd) break;
        await refresh(); // the stream ended without the plan's end: has the execution ended?
        if (state.done) break;
      } catch (error) {
        if (error instanceof ApiProblem && error.status >= 400 && error.status < 500) return fail(error);
        setConnection("reconnecting…");
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    setConnection("the run has ended");
  }

  // ---------------------------------------------------------------- state

  function step(id) {
    let s = state.steps.get(id);
    if (!s) {
      s = { id, tool: "", deps: [], status: "pending", attempts: 0, started: null, ended: null, hasOutput: false };
      state.steps.set(id, s);
      state.order.push(id);
    }
    return s;
  }

  function onRecord(record) {
    state.lastSeq = Math.max(state.lastSeq, record.seq || 0);
    const p = record.payload || {};
    const s = record.step_id ? step(record.step_id) : null;
    switch (record.type) {
      case "plan_started":
        state.startedAt = record.at;
        if (!FINISHED_PLAN.has(state.status)) state.status = "running";
        (p.steps || []).forEach(step);
        break;
      case "run_started":
      case "run_resumed":
        if (!FINISHED_PLAN.has(state.status)) state.status = "running";
        break;
      case "step_started":
        if (!FINISHED_STEP.has(s.status)) s.status = "running";
        s.attempts = Math.max(s.attempts, p.attempt || 0);
        s.started = s.started ?? record.at;
        if (p.tool && p.tool !== s.tool) s.fallback = p.tool;
        s.retrying = null;
        break;
      case "step_retrying":
        s.retrying = p;
        s.error = p.error;
        break;
      case "step_finished":
        s.status = p.status;
        s.attempts = Math.max(s.attempts, p.attempts || 0);
        s.error = p.error || null;
        s.retrying = null;
        s.ended = s.ended ?? record.at;
        refreshSoon();
        break;
      case "approval_requested":
      case "run_pending_approval":
        if (record.type === "run_pending_approval") state.status = "pending_approval";
        refreshSoon();
        break;
      case "plan_finished":
        state.status = p.status;
        state.endedAt = record.at;
        state.done = true;
        state.sawEnd = true;
        refreshSoon();
        break;
      default:
        break;
    }
    draw();
  }

  function merge(view) {
    if (!FINISHED_PLAN.has(state.status) || FINISHED_PLAN.has(view.status)) state.status = view.status;
    if (FINISHED_PLAN.has(view.status)) {
      state.done = true;
      state.endedAt = state.endedAt ?? view.updated_at;
    }
    state.createdAt = state.createdAt ?? view.created_at;
    state.approval = view.status === "pending_approval" ? view.approval || null : null;
    for (const row of view.steps || []) {
      const s = step(row.id);
      if (row.tool && !s.tool) s.tool = row.tool;
      if (FINISHED_STEP.has(row.status)) {
        s.status = row.status;
        s.error = row.error || null;
        s.output = row.output;
        s.hasOutput = row.status === "succeeded";
        s.reused = !!row.reused;
        s.usedFallback = !!row.used_fallback;
        s.retrying = null;
        if (row.started_at != null) s.started = row.started_at;
        if (row.ended_at != null) s.ended = row.ended_at;
      } else if (row.status === "pending_approval" && !FINISHED_STEP.has(s.status) && s.status !== "running") {
        // (a view read before an answer may arrive after the events of the step's run: never go back)
        s.status = "pending_approval";
      } else if (row.status === "running" && s.status === "pending") {
        s.status = "running";
        if (row.started_at != null) s.started = row.started_at;
      }
      s.attempts = Math.max(s.attempts, row.attempts || 0);
    }
    draw();
  }

  let refreshTimer = null;
  function refreshSoon() {
    if (refreshTimer === null) refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 60);
  }

  async function refresh() {
    try {
      merge(await getJSON(api));
    } catch (error) {
      if (error instanceof ApiProblem) fail(error);
    }
  }

  // Answers one waiting step: {"approve": true} or {"reject": reason}. The execution goes on in the service.
  async function answer(id, reply) {
    try {
      const response = await fetch(`${api}/approvals`, {
        method: "POST",
        headers: { "X-API-Key": key, "Content-Type": "application/json" },
        body: JSON.stringify({ answers: { [id]: reply } }),
      });
      if (!response.ok) throw await problemOf(response);
      state.approval = null;
      state.reasons.delete(id);
      if (!FINISHED_PLAN.has(state.status)) state.status = "running";
      draw();
      refreshSoon();
    } catch (error) {
      if (error instanceof ApiProblem) fail(error);
    }
  }

  function html(name, attrs = {}, text = null) {
    const node = document.createElement(name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== null) node.textContent = text;
    return node;
  }

  function approvalBox(id) {
    const pending = state.approval && (state.approval.steps || []).find((p) => p.step_id === id);
    if (!pending) return null;
    const box = html("div", { class: "approval" });
    const said = pending.ready === false
      ? "will need approval once its inputs are computed; answer now or then" // (kept until it is ready)
      : "waits for approval";
    box.append(html("div", { class: "note" }, `${said}: ${show(pending.arguments)}`));
    if ((pending.dependents || []).length) {
      box.append(html("div", { class: "note" }, `then: ${pending.dependents.join(", ")}`));
    }
    const approve = html("button", { type: "button", class: "approve" }, "Approve");
    approve.addEventListener("click", (e) => { e.stopPropagation(); answer(id, { approve: true }); });
    const reason = html("input", { type: "text", class: "reason", placeholder: "reason", "aria-label": "reason" });
    reason.value = state.reasons.get(id) || "";
    reason.addEventListener("click", (e) => e.stopPropagation());
    reason.addEventListener("input", () => state.reasons.set(id, reason.value));
    const reject = html("button", { type: "button", class: "reject" }, "Reject");
    reject.addEventListener("click", (e) => {
      e.stopPropagation();
      answer(id, { reject: reason.value || "rejected in the live view" });
    });
    box.append(approve, reason, reject);
    return box;
  }

  // ---------------------------------------------------------------- drawing

  let drawQueued = false;
  function draw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => {
      drawQueued = false;
      const critical = criticalPath();
      drawHeader();
      drawGraph(critical);
      drawWaterfall(critical);
      drawTable();
    });
  }

  function now() { return Date.now() / 1000; }

  function duration(s) {
    if (s.started == null) return null;
    const end = s.ended ?? (s.status === "running" ? (state.endedAt ?? now()) : null);
    return end == null ? null : Math.max(0, end - s.started);
  }

  function topological() {
    const indegree = new Map(state.order.map((id) => [id, 0]));
    const dependents = new Map(state.order.map((id) => [id, []]));
    for (const id of state.order) {
      for (const d of state.steps.get(id).deps) {
        if (dependents.has(d)) { dependents.get(d).push(id); indegree.set(id, indegree.get(id) + 1); }
      }
    }
    const ready = state.order.filter((id) => indegree.get(id) === 0);
    for (let i = 0; i < ready.length; i++) {
      for (const t of dependents.get(ready[i])) {
        indegree.set(t, indegree.get(t) - 1);
        if (indegree.get(t) === 0) ready.push(t);
      }
    }
    return ready;
  }

  // The heaviest chain of dependencies by measured time (running steps count until now), as
  // PlanResult.critical_path; by step count while nothing has started.
  function criticalPath() {
    const timed = state.order.some((id) => state.steps.get(id).started != null);
    const best = new Map();
    for (const id of topological()) {
      const s = state.steps.get(id);
      const weight = timed ? (duration(s) ?? 0) : 1;
      let prev = [0, null];
      for (const d of s.deps) {
        const b = best.get(d);
        if (b && b[0] > prev[0]) prev = [b[0], d];
      }
      best.set(id, [prev[0] + weight, prev[1]]);
    }
    let end = null;
    for (const [id, b] of best) if (end === null || b[0] > best.get(end)[0]) end = id;
    const chain = new Set();
    for (let cur = end; cur !== null; cur = best.get(cur)[1]) chain.add(cur);
    return chain;
  }

  function el(name, attrs = {}, text = null) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== null) node.textContent = text;
    return node;
  }

  function seconds(value) {
    if (value == null) return "";
    if (value < 1) return `${Math.round(value * 1000)} ms`;
    if (value < 60) return `${value.toFixed(value < 10 ? 2 : 1)} s`;
    return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  }

  function drawHeader() {
    document.body.dataset.status = state.status;
    const badge = $("status");
    badge.dataset.status = state.status;
    badge.textContent = state.status;
    $("run-id").textContent = execId;
    const all = state.order.map((id) => state.steps.get(id));
    const count = (pred) => all.filter(pred).length;
    const parts = [`${count((s) => FINISHED_STEP.has(s.status))} of ${all.length} steps ended`];
    const running = count((s) => s.status === "running");
    const failed = count((s) => ["failed", "timed_out", "unknown_outcome"].includes(s.status));
    if (running) parts.push(`${running} running`);
    if (failed) parts.push(`${failed} failed`);
    const since = state.startedAt ?? state.createdAt;
    if (since != null && state.status !== "queued") parts.push(seconds((state.endedAt ?? now()) - since));
    $("counts").textContent = parts.join(" · ");
    document.title = `${state.status} · ${execId} · toolplan`;
  }

  const measure = document.createElement("canvas").getContext("2d");
  function textWidth(text, font) {
    measure.font = font;
    return measure.measureText(text).width;
  }

  function layout() {
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 56, marginx: 6, marginy: 6 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const id of state.order) {
      const s = state.steps.get(id);
      const width = Math.max(textWidth(id, "600 13px sans-serif"), textWidth(`${s.tool} · 00.00 s`, "12px monospace"));
      g.setNode(id, { width: Math.ceil(Math.min(width, 320)) + 24, height: NODE_H });
    }
    for (const id of state.order) for (const d of state.steps.get(id).deps) if (state.steps.has(d)) g.setEdge(d, id);
    dagre.layout(g);
    return g;
  }

  function clip(text, pixels, font) {
    if (textWidth(text, font) <= pixels) return text;
    let cut = text;
    while (cut.length > 1 && textWidth(`${cut}…`, font) > pixels) cut = cut.slice(0, -1);
    return `${cut}…`;
  }

  function drawGraph(critical) {
    if (!state.order.length || typeof dagre === "undefined") return;
    if (!state.layout || state.layout.nodeCount() !== state.order.length) state.layout = layout();
    const g = state.layout;
    const { width, height } = g.graph();
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "the plan's steps and dependencies" });
    svg.style.maxWidth = `${Math.max(width, 240)}px`;
    const defs = el("defs");
    for (const kind of ["plain", "critical"]) {
      const marker = el("marker", { id: `arrow-${kind}`, viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse", markerWidth: "9", markerHeight: "9", orient: "auto-start-reverse" });
      marker.append(el("path", { d: "M0,0 L10,5 L0,10 z", class: kind === "critical" ? "arrow critical" : "arrow" }));
      defs.append(marker);
    }
    svg.append(defs);
    for (const e of g.edges()) {
      const points = g.edge(e).points;
      const d = smooth(points);
      const hot = critical.has(e.v) && critical.has(e.w);
      svg.append(el("path", { d, class: hot ? "edge critical" : "edge", "marker-end": `url(#arrow-${hot ? "critical" : "plain"})`, "data-from": e.v, "data-to": e.w }));
    }
    for (const id of state.order) {
      const s = state.steps.get(id);
      const n = g.node(id);
      const classes = ["node"];
      if (critical.has(id)) classes.push("critical");
      if (state.selected === id) classes.push("selected");
      const group = el("g", { class: classes.join(" "), "data-step": id, "data-state": s.status, transform: `translate(${(n.x - n.width / 2).toFixed(1)},${(n.y - n.height / 2).toFixed(1)})` });
      group.append(el("title", {}, tooltip(s)));
      group.append(el("rect", { width: n.width, height: n.height, rx: 8, ry: 8 }));
      group.append(el("text", { x: 12, y: 19, class: "sid" }, clip(id, n.width - 20, "600 13px sans-serif")));
      const d = duration(s);
      const tool = s.fallback ? `${s.fallback} (fallback)` : s.tool;
      const detail = d == null ? tool : `${tool} · ${seconds(d)}`;
      group.append(el("text", { x: 12, y: 36, class: "tool" }, clip(detail, n.width - 20, "12px monospace")));
      group.addEventListener("click", () => select(id));
      svg.append(group);
    }
    $("graph").replaceChildren(svg);
  }

  // A path through dagre's points, rounded at each bend (each bend is a control point).
  function smooth(points) {
    const f = (p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`;
    let d = `M${f(points[0])}`;
    for (let i = 1; i < points.length - 1; i++) {
      const mid = { x: (points[i].x + points[i + 1].x) / 2, y: (points[i].y + points[i + 1].y) / 2 };
      d += ` Q${f(points[i])} ${f(i === points.length - 2 ? points[i + 1] : mid)}`;
    }
    if (points.length === 2) d += ` L${f(points[1])}`;
    return d;
  }

  function tooltip(s) {
    const lines = [`${s.id} (${s.tool}): ${s.status}`];
    if (s.attempts > 1) lines.push(`${s.attempts} attempts`);
    if (s.error) lines.push(`${s.error.kind}: ${s.error.message}`);
    return lines.join("\n");
  }

  function select(id) {
    state.selected = state.selected === id ? null : id;
    draw();
    const row = document.querySelector(`#steps tr[data-step="${CSS.escape(id)}"]`);
    if (row && state.selected) row.scrollIntoView({ block: "nearest" });
  }

  function niceStep(span) {
    const raw = span / 6;
    const power = 10 ** Math.floor(Math.log10(raw || 1));
    for (const m of [1, 2, 5, 10]) if (raw <= m * power) return m * power;
    return 10 * power;
  }

  function drawWaterfall(critical) {
    const ran = state.order.map((id) => state.steps.get(id)).filter((s) => s.started != null);
    ran.sort((a, b) => a.started - b.started || state.order.indexOf(a.id) - state.order.indexOf(b.id));
    const rest = state.order.map((id) => state.steps.get(id)).filter((s) => s.started == null);
    const rows = [...ran, ...rest];
    const t0 = Math.min(state.startedAt ?? Infinity, ...ran.map((s) => s.started));
    const end = Math.max(state.endedAt ?? 0, ...ran.map((s) => s.started + (duration(s) ?? 0)), Number.isFinite(t0) ? t0 + 0.001 : 0);
    const span = Number.isFinite(t0) ? Math.max(end - t0, 0.001) : 1;
    const labelW = Math.min(200, Math.max(60, ...rows.map((s) => textWidth(s.id, "12px monospace") + 16)));
    const width = Math.max(360, $("waterfall").clientWidth || 600);
    const rowH = 22;
    const top = 20;
    const height = top + rows.length * rowH + 6;
    const scale = (width - labelW - 12) / span;
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "when each step ran" });
    const tick = niceStep(span);
    for (let t = 0; t <= span + 1e-9; t += tick) {
      const x = labelW + t * scale;
      svg.append(el("line", { x1: x, x2: x, y1: top - 4, y2: height, class: "grid" }));
      svg.append(el("text", { x, y: 12, class: "tick", "text-anchor": "middle" }, seconds(t)));
    }
    rows.forEach((s, i) => {
      const y = top + i * rowH;
      svg.append(el("text", { x: 4, y: y + 15, class: "label" }, clip(s.id, labelW - 10, "12px monospace")));
      if (s.started == null) return;
      const x = labelW + (s.started - t0) * scale;
      const w = Math.max(2, (duration(s) ?? 0) * scale);
      const bar = el("rect", { x, y: y + 3, width: w, height: rowH - 6, rx: 3, class: critical.has(s.id) ? "bar critical" : "bar", "data-state": s.status, "data-step": s.id });
      bar.append(el("title", {}, `${s.id}: ${s.status}, ${seconds(duration(s))}`));
      svg.append(bar);
    });
    $("waterfall").replaceChildren(svg);
    const busy = ran.reduce((sum, s) => sum + (s.reused ? 0 : (duration(s) ?? 0)), 0);
    const wall = (state.endedAt ?? (ran.length ? end : null)) - t0;
    $("timeline-sub").textContent = ran.length && wall > 0
      ? `what ran in parallel · parallelism ${(busy / wall).toFixed(2)}×`
      : "what ran in parallel";
  }

  function show(value) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > 2000 ? `${text.slice(0, 2000)}… (${text.length} characters)` : text;
  }

  function drawTable() {
    const t0 = Math.min(state.startedAt ?? Infinity, ...state.order.map((id) => state.steps.get(id).started ?? Infinity));
    const body = document.createElement("tbody");
    for (const id of state.order) {
      const s = state.steps.get(id);
      const tr = document.createElement("tr");
      tr.dataset.step = id;
      tr.dataset.state = s.status;
      if (state.selected === id) tr.className = "selected";
      const cell = (cls, text) => {
        const td = document.createElement("td");
        td.className = cls;
        if (text !== null) td.textContent = text;
        tr.append(td);
        return td;
      };
      cell("sid", id);
      cell("tool", s.fallback || s.usedFallback ? `${s.tool} → ${s.fallback || "fallback"}` : s.tool);
      const stateCell = cell("state", null);
      const badge = document.createElement("span");
      badge.textContent = s.retrying ? `retrying (attempt ${s.retrying.attempt})` : s.status.replace("_", " ");
      stateCell.append(badge);
      cell("num attempts", s.attempts ? String(s.attempts) : "");
      cell("num start", s.started != null && Number.isFinite(t0) ? `+${seconds(Math.max(0, s.started - t0))}` : "");
      cell("num time", seconds(duration(s)));
      const result = cell("result", null);
      if (s.error) {
        const pre = document.createElement("pre");
        pre.className = "error";
        const kind = document.createElement("span");
        kind.className = "kind";
        kind.textContent = `${s.error.kind}: `;
        pre.append(kind, document.createTextNode(show(s.error.message)));
        result.append(pre);
      } else if (s.hasOutput) {
        const pre = document.createElement("pre");
        pre.className = "output";
        pre.textContent = show(s.output);
        result.append(pre);
      }
      const box = s.status === "pending_approval" || s.status === "pending" ? approvalBox(id) : null;
      if (box) result.append(box);
      const notes = [];
      if (s.reused) notes.push("reused from the store");
      if (state.outputSteps.has(id) && state.outputSteps.size < state.order.length) notes.push("output step");
      if (notes.length) {
        const note = document.createElement("div");
        note.className = "note";
        note.textContent = notes.join(" · ");
        result.append(note);
      }
      tr.addEventListener("click", () => select(id));
      body.append(tr);
    }
    $("steps").tBodies[0].replaceWith(body);
  }

  function drawLegend() {
    const legend = $("legend");
    for (const [status, label] of LEGEND) {
      const item = document.createElement("span");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.dataset.legend = status;
      item.append(swatch, document.createTextNode(label));
      legend.append(item);
    }
    const crit = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.dataset.legend = "critical";
    crit.append(swatch, document.createTextNode("critical path"));
    legend.append(crit);
  }

  function setConnection(text) { $("connection").textContent = text; }

  function fail(error) {
    if (error instanceof ApiProblem && error.status === 401) {
      toolplanKey.forget();
      toolplanKey.ask(error.message);
      return;
    }
    const box = $("problem");
    box.hidden = false;
    toolplanKey.setMessage(box, error.message || String(error));
    if (!state.order.length) { state.status = "unavailable"; drawHeader(); }
  }

  // ---------------------------------------------------------------- start

  let started = false;
  async function start() {
    if (started) return;
    if (!execId) return fail(new Error("Open this page as /ui/executions/ID (the execution's id)."));
    if (!key) return toolplanKey.ask(null);
    started = true;
    try {
      const graph = await getJSON(`${api}/graph`);
      for (const g of graph.steps) Object.assign(step(g.id), { tool: g.tool, deps: g.deps });
      state.outputSteps = new Set(graph.output_steps || []);
      state.layout = null;
      merge(await getJSON(api));
    } catch (error) {
      started = false;
      return fail(error);
    }
    follow();
    setInterval(() => { if (!state.done && state.status === "running") draw(); }, 250); // running bars grow
  }

  drawLegend();
  key = toolplanKey.read();
  start();
})();
