"""How the service's pages show a server's message (the function of key.js, run by Node without a browser)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from test_ui_package import UI

# A stand-in for the few DOM calls the function makes: nodes print as text, <code> as <code>...</code>.
_DOM = """
const document = {
  createElement: (tag) => ({tag, textContent: "", html() { return `<${tag}>${this.textContent}</${tag}>`; }}),
  createTextNode: (text) => ({html: () => text}),
};
const element = {children: [], replaceChildren() { this.children = []; }, append(n) { this.children.push(n); }};
"""


def _shown(message: str) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run key.js's function")
    script = (UI / "static" / "key.js").read_text(encoding="utf-8")
    found = re.search(r"\n  function setMessage\(.*?\n  }\n", script, re.S)
    assert found, "key.js has no setMessage"
    program = f"{_DOM}{found.group(0)}\nsetMessage(element, {json.dumps(message)});\n"
    program += "process.stdout.write(element.children.map((n) => n.html()).join(''));"
    return subprocess.run([node, "-e", program], capture_output=True, text=True, check=True, timeout=60).stdout


def test_a_wrong_keys_message_shows_commands_as_code_not_backticks() -> None:
    message = "The X-API-Key header holds no valid key (unknown or revoked). `toolplan keys list` shows the keys."
    assert _shown(message) == (
        "The X-API-Key header holds no valid key (unknown or revoked). <code>toolplan keys list</code> shows the keys."
    )
    assert _shown("of the address `toolplan run --ui` printed.") == (
        "of the address <code>toolplan run --ui</code> printed."
    )
    assert _shown("an unpaired ` stays") == "an unpaired ` stays"
    assert _shown("plain") == "plain"
