// The service's home page: its recent executions, each linked to its live view.
// The page itself needs no key; the listing does (key.js: from the address's fragment or the form,
// kept in this tab, where the live view finds it too).
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  let key = "";

  function cell(row, text) {
    const td = document.createElement("td");
    if (text instanceof Node) td.append(text);
    else td.textContent = text;
    row.append(td);
  }

  async function list() {
    const response = await fetch("/v1/executions?limit=50", { headers: { "X-API-Key": key }, cache: "no-store" });
    const body = await response.json();
    if (response.status === 401) {
      toolplanKey.forget();
      return toolplanKey.ask(body.message || "That key was refused: enter another.");
    }
    if (!response.ok) {
      $("problem").textContent = body.message || `The service answered ${response.status}.`;
      $("problem").hidden = false;
      return;
    }
    const rows = $("executions").querySelector("tbody");
    rows.replaceChildren();
    for (const e of body.items) {
      const row = document.createElement("tr");
      row.dataset.status = e.status;
      const link = document.createElement("a");
      link.href = `/ui/executions/${encodeURIComponent(e.execution_id)}`;
      link.textContent = e.execution_id;
      cell(row, link);
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.dataset.status = e.status;
      badge.textContent = e.status;
      cell(row, badge);
      cell(row, e.plan_id || "");
      cell(row, String(e.calls ?? 0));
      cell(row, new Date(e.created_at * 1000).toLocaleString());
      rows.append(row);
    }
    $("empty").hidden = body.items.length > 0;
    $("key-form").hidden = true;
    $("views").hidden = false;
    document.body.dataset.status = "ready";
  }

  toolplanKey.onEntry((value) => {
    key = value;
    list();
  });

  key = toolplanKey.read();
  if (key) list();
  else toolplanKey.ask(null);
})();
