"""``--openapi SPEC[=BASE_URL]`` on the command line: ``toolplan run`` and ``toolplan mcp serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_app import ApiServer

PLAN = {
    "steps": [
        {"id": "rex", "tool": "get_pet_pets__pet_id__get", "arguments": {"pet_id": 1}},
        {"id": "same", "tool": "list_pets_pets_get", "arguments": {"tag": "{{rex.tag}}"}},
    ],
    "output_steps": ["same"],
}


def toolplan(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolplan.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60, env={**os.environ, **env}, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_run_with_an_openapi_url_and_a_file_with_a_base_url(api: ApiServer, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    done = toolplan(tmp_path, "run", str(plan), "--openapi", f"{api.url}/openapi.json", "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    same = next(step for step in out["steps"] if step["id"] == "same")
    assert [p["name"] for p in same["output"]] == ["Rex"]
    spec = tmp_path / "openapi.json"
    spec.write_text(httpx.get(f"{api.url}/openapi.json").text)
    done = toolplan(tmp_path, "run", str(plan), "--openapi", f"{spec}={api.url}", "--json")
    assert done.returncode == 0, done.stderr
    # A loopback server only the document names is not trusted: the steps fail, nothing is called.
    document = json.loads(spec.read_text())
    spec.write_text(json.dumps({**document, "servers": [{"url": api.url}]}))
    before = len(api.seen)
    done = toolplan(tmp_path, "run", str(plan), "--openapi", str(spec), "--json")
    assert done.returncode == 1 and "loopback, private" in done.stdout and len(api.seen) == before


@pytest.mark.slow
def test_a_bad_document_is_one_line(api: ApiServer, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    (tmp_path / "swagger.json").write_text(json.dumps({"swagger": "2.0", "paths": {}}))
    done = toolplan(tmp_path, "run", str(plan), "--openapi", "swagger.json=http://127.0.0.1:1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: --openapi 'swagger.json=http://127.0.0.1:1': The document says swagger")
    done = toolplan(tmp_path, "run", str(plan), "--openapi", "missing.json")
    assert done.returncode == 2 and "does not exist" in done.stderr


@pytest.mark.slow
async def test_mcp_serve_offers_the_operations(api: ApiServer, tmp_path: Path) -> None:
    from toolplan.mcp import MCPToolset

    command = [sys.executable, "-m", "toolplan.cli", "mcp", "serve", "--openapi", f"{api.url}/openapi.json"]
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}  # the server imports this toolplan
    async with MCPToolset.stdio(command, cwd=tmp_path, env=env, prefix="gw") as served:
        names = {d.name for d in served.definitions()}
        assert {"gw_get_pet_pets__pet_id__get", "gw_execute_tool_plan"} <= names
        got = await served.execute("gw_execute_tool_plan", PLAN)  # with a prefix, the gateway's plan tool is a tool
    assert got.ok and [p["name"] for p in got.content["outputs"]["same"]] == ["Rex"]
