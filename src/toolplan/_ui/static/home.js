// The service's home page: its recent executions, each linked to its live view.
// The page itself needs no key; the listing does: the key comes from the address's fragment
// (#key=..., never sent to a server) or from the form, and stays in this tab (session storage),
// where the live view finds it too.
(() => {
  "use strict";
  const KEY_STORE = "toolplan-api-key";
  const $ = (id) => document.getElementById(id);
  let key = "";

  function readKey() {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const given = fragment.get("key");
    if (given) {
      sessionStorage.setItem(KEY_STORE, given);
      history.replaceState(null, "", location.pathname + location.search); // out of the address bar
      return given;
    }
    return sessionStorage.getItem(KEY_STORE) || "";
  }

  function askKey(message) {
    $("key-form").hidden = false;
    $("views").hidden = true;
    if (message) $("key-message").textContent = message;
    $("key-input").focus();
  }

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
      sessionStorage.removeItem(KEY_STORE);
      return askKey(body.message || "That key was refused: enter another.");
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

  $("key-entry").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("key-input").value.trim();
    if (!value) return;
    key = value;
    sessionStorage.setItem(KEY_STORE, key);
    list();
  });

  key = readKey();
  if (key) list();
  else askKey(null);
})();
