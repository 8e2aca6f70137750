// The API key of the service's pages (the home page and the live page load this file first).
// It comes from the address's fragment (#key=..., never sent to a server) or from the page's form,
// and stays in this tab (session storage), where every page of the service finds it.
const toolplanKey = (() => {
  "use strict";
  const STORE = "toolplan-api-key";
  const $ = (id) => document.getElementById(id);

  // The key from the address's fragment (then taken out of the address bar), else the tab's.
  function read() {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const given = fragment.get("key");
    if (given) {
      sessionStorage.setItem(STORE, given);
      history.replaceState(null, "", location.pathname + location.search); // out of the address bar
      return given;
    }
    return sessionStorage.getItem(STORE) || "";
  }

  // The server refused the key: the tab forgets it.
  function forget() {
    sessionStorage.removeItem(STORE);
  }

  // A server message as text, its `quoted` parts (commands, headers) as code.
  function setMessage(element, message) {
    element.replaceChildren();
    const parts = String(message).split("`");
    if (parts.length % 2 === 0) { // an unpaired backtick stays text
      const last = parts.pop();
      parts[parts.length - 1] += "`" + last;
    }
    parts.forEach((part, i) => {
      if (i % 2 === 1) {
        const code = document.createElement("code");
        code.textContent = part;
        element.append(code);
      } else if (part) {
        element.append(document.createTextNode(part));
      }
    });
  }

  // Shows the form (with the server's message, if any) in place of the page's views.
  function ask(message) {
    $("key-form").hidden = false;
    $("views").hidden = true;
    if (message) setMessage($("key-message"), message);
    $("key-input").focus();
  }

  // Calls onKey(key) with each key the form is given, once the tab keeps it.
  function onEntry(onKey) {
    $("key-entry").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("key-input").value.trim();
      if (!value) return;
      sessionStorage.setItem(STORE, value);
      onKey(value);
    });
  }

  return { read, forget, setMessage, ask, onEntry };
})();
