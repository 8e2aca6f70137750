"""``names="oasis"``: the built-in toolsets under oasis's names, with the same confinement, limits and annotations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from builtin_support import needs_shell
from http_server import Server

from toolplan import Agent, ToolError, ToolRegistry, UserError, execute_plan
from toolplan.builtin import DataTools, FileTools, HttpTools, ShellTools
from toolplan.testing import ScriptedModel


def flags(tools: Any) -> dict[str, tuple[bool, bool, bool]]:
    """name -> (read_only, idempotent, destructive)."""
    registry = ToolRegistry.of(tools)
    return {
        d.name: (d.annotations.read_only, d.annotations.idempotent, d.annotations.destructive)
        for d in registry.definitions()
    }


# -- the names ---------------------------------------------------------------------------------------
def test_file_names_and_annotations(workspace: Path) -> None:
    assert flags(FileTools(workspace, names="oasis")) == {
        "file_read": (True, True, False),
        "file_list": (True, True, False),
        "file_stat": (True, True, False),
        "file_write": (False, False, True),
        "file_delete": (False, False, True),
    }
    assert list(flags(FileTools(workspace, names="oasis", read_only=True))) == [
        "file_read",
        "file_list",
        "file_stat",
    ]
    # the default names are unchanged
    assert list(flags(FileTools(workspace))) == ["read_file", "list_files", "search_files", "write_file"]


def test_data_http_and_shell_names(workspace: Path) -> None:
    assert flags(DataTools(names="oasis")) == dict.fromkeys(
        ["data_parse", "data_filter", "data_aggregate", "data_transform"], (True, True, False)
    )
    assert flags(HttpTools(allow_hosts=["*"], names="oasis")) == {
        "http_fetch": (True, True, False),
        "http_post": (False, False, True),
    }
    assert list(flags(HttpTools(names="oasis", read_only=True))) == ["http_fetch"]
    assert flags(ShellTools(workspace, names="oasis")) == {"shell_exec": (False, False, True)}
    assert list(flags(ShellTools(workspace, names="oasis", prefix="ws_"))) == ["ws_shell_exec"]


@pytest.mark.parametrize("make", [FileTools, ShellTools])
def test_unknown_names_are_refused(workspace: Path, make: Any) -> None:
    with pytest.raises(UserError, match="'toolplan' \\(the default\\) or 'oasis'"):
        make(workspace, names="langchain")


# -- files ---------------------------------------------------------------------------------------------
def test_file_stat(workspace: Path) -> None:
    files = FileTools(workspace, names="oasis")
    files.write_file("a/b.txt", "hello")
    got = files.stat_file("a/b.txt")
    assert got["exists"] and got["type"] == "file" and got["size"] == 5 and got["links"] == 1
    assert got["mode"] == f"{os.stat(workspace / 'a' / 'b.txt').st_mode & 0o7777:04o}"
    assert files.stat_file("a")["type"] == "directory"
    assert files.stat_file(".")["type"] == "directory"
    assert files.stat_file("a/missing.txt") == {"path": "a/missing.txt", "exists": False}
    os.symlink("/etc/passwd", workspace / "link")
    assert files.stat_file("link")["type"] == "symlink"  # described, not followed
    with pytest.raises(ToolError, match="outside the workspace"):
        files.stat_file("/etc/passwd")
    with pytest.raises(ToolError, match=r"'\.\.'"):
        files.stat_file("../x")


def test_file_delete(workspace: Path, tmp_path: Path) -> None:
    files = FileTools(workspace, names="oasis")
    files.write_file("d/one.txt", "1")
    with pytest.raises(ToolError, match="not empty"):
        files.delete_file("d")
    assert files.delete_file("d/one.txt") == {"path": "d/one.txt", "deleted": "file"}
    assert files.delete_file("d") == {"path": "d", "deleted": "directory"}
    assert not (workspace / "d").exists()
    with pytest.raises(ToolError, match=r"No file 'gone\.txt'"):
        files.delete_file("gone.txt")
    with pytest.raises(ToolError, match="workspace directory itself"):
        files.delete_file(".")


def test_file_delete_never_leaves_the_workspace(workspace: Path, tmp_path: Path) -> None:
    files = FileTools(workspace, names="oasis")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "keep.txt").write_text("keep")
    os.symlink(secret, workspace / "to_secret")
    os.symlink(outside_dir, workspace / "to_dir")
    os.link(secret, workspace / "hard")
    with pytest.raises(ToolError, match="symbolic link"):
        files.delete_file("to_secret")
    with pytest.raises(ToolError, match="symbolic link"):
        files.delete_file("to_dir/keep.txt")
    with pytest.raises(ToolError, match="hard links"):
        files.delete_file("hard")
    with pytest.raises(ToolError, match="outside the workspace"):
        files.delete_file(str(secret))
    with pytest.raises(ToolError, match=r"'\.\.'"):
        files.delete_file("../secret.txt")
    assert secret.read_text() == "top secret" and (outside_dir / "keep.txt").exists()
    assert (workspace / "to_secret").is_symlink() and (workspace / "hard").exists()


async def test_a_plan_under_oasis_names(workspace: Path) -> None:
    files = FileTools(workspace, names="oasis")
    csv_text = "region,amount\nnorth,10\nsouth,5\nnorth,2\n"
    (workspace / "sales.csv").write_text(csv_text)
    plan = {
        "steps": [
            {"id": "read", "tool": "file_read", "arguments": {"path": "sales.csv"}},
            {"id": "rows", "tool": "data_parse", "arguments": {"text": "$ref:read.content"}},
            {
                "id": "totals",
                "tool": "data_aggregate",
                "arguments": {
                    "data": "$ref:rows",
                    "group_by": ["region"],
                    "aggregates": {"total": {"op": "sum", "field": "amount"}, "n": {"op": "count"}},
                },
            },
            {"id": "big", "tool": "data_filter", "arguments": {"data": "$ref:totals", "where": "total > `10`"}},
            {"id": "stat", "tool": "file_stat", "arguments": {"path": "sales.csv"}},
        ]
    }
    result = await execute_plan(plan, [files, DataTools(names="oasis")])
    assert result.status == "succeeded", result.errors
    assert result.steps["totals"].output == [
        {"region": "north", "total": 12, "n": 2},
        {"region": "south", "total": 5, "n": 1},
    ]
    assert result.steps["big"].output == [{"region": "north", "total": 12, "n": 2}]
    assert result.steps["stat"].output["size"] == len(csv_text)


def test_an_agent_accepts_the_oasis_names(workspace: Path) -> None:
    agent = Agent(ScriptedModel(["ok"]), tools=[FileTools(workspace, names="oasis"), DataTools(names="oasis")])
    assert {"file_delete", "file_stat", "data_parse", "data_aggregate"} <= set(agent.registry.names)


# -- data ----------------------------------------------------------------------------------------------
def test_data_parse_json_and_csv() -> None:
    data = DataTools(names="oasis", max_text_chars=100)
    assert data.parse('{"a": [1, 2]}') == {"a": [1, 2]}
    assert data.parse("[1, 2]", format="json") == [1, 2]
    assert data.parse("a;b\n1;x\n", delimiter=";") == [{"a": 1, "b": "x"}]
    assert data.parse("a,b\n1,x\n", infer_types=False) == [{"a": "1", "b": "x"}]
    assert data.parse("[not json", format="auto") == []  # not JSON: read as CSV, a header without rows
    with pytest.raises(ToolError, match="not JSON"):
        data.parse("{nope", format="json")
    with pytest.raises(ToolError, match="limit is 100"):
        data.parse("x" * 101)


def test_data_filter_and_transform() -> None:
    data = DataTools(names="oasis")
    rows = [{"n": 1, "tag": "a"}, {"n": 5, "tag": "b"}, {"n": 9, "tag": "a"}]
    assert data.filter(rows, "n > `3` && tag == 'a'") == [{"n": 9, "tag": "a"}]
    assert data.filter('[{"n": 1}]', "n == `1`") == [{"n": 1}]
    with pytest.raises(ToolError, match="needs a list"):
        data.filter({"n": 1}, "n")
    operations: Any = [{"op": "pick", "fields": ["n"]}, {"op": "limit", "count": 1}]  # as a model sends them
    assert data.json_transform(rows, operations) == [{"n": 1}]


def test_data_aggregate() -> None:
    data = DataTools(names="oasis")
    rows = [
        {"region": "n", "city": "a", "amount": 10},
        {"region": "s", "city": "b", "amount": 4},
        {"region": "n", "city": "c", "amount": None},
        {"region": "n", "city": "a", "amount": 2.5},
    ]
    figures = {
        "rows": {"op": "count"},
        "priced": {"op": "count", "field": "amount"},
        "cities": {"op": "count_distinct", "field": "city"},
        "total": {"op": "sum", "field": "amount"},
        "mean": {"op": "avg", "field": "amount"},
        "low": {"op": "min", "field": "amount"},
        "high": {"op": "max", "field": "city"},
    }
    got = data.aggregate(rows, figures, group_by=["region"])  # type: ignore[arg-type]  # plain dicts, as a model sends
    assert got == [
        {"region": "n", "rows": 3, "priced": 2, "cities": 2, "total": 12.5, "mean": 6.25, "low": 2.5, "high": "c"},
        {"region": "s", "rows": 1, "priced": 1, "cities": 1, "total": 4, "mean": 4.0, "low": 4, "high": "b"},
    ]
    assert data.aggregate(rows, {"n": {"op": "count"}}) == [{"n": 4}]  # type: ignore[dict-item]
    assert data.aggregate([], {"n": {"op": "count"}}) == [{"n": 0}]  # type: ignore[dict-item]
    with pytest.raises(ToolError, match="needs numbers"):
        data.aggregate(rows, {"s": {"op": "sum", "field": "city"}})  # type: ignore[dict-item]
    with pytest.raises(ToolError, match="needs a field"):
        data.aggregate(rows, {"s": {"op": "sum"}})  # type: ignore[dict-item]
    with pytest.raises(ToolError, match="list of objects"):
        data.aggregate([1, 2], {"n": {"op": "count"}})  # type: ignore[dict-item]
    with pytest.raises(ToolError, match="limit is 2"):
        DataTools(names="oasis", max_rows=2).aggregate(rows, {"n": {"op": "count"}})  # type: ignore[dict-item]


# -- http and shell ------------------------------------------------------------------------------------
async def test_http_fetch_keeps_the_allow_list(server: Server) -> None:
    http = HttpTools(allow_hosts=[f"127.0.0.1:{server.port}"], allow_private_networks=True, names="oasis")
    result = await execute_plan(
        {"steps": [{"id": "g", "tool": "http_fetch", "arguments": {"url": server.url("/json")}}]}, [http]
    )
    assert result.steps["g"].output["json"] == {"ok": True, "items": [1, 2, 3]}
    with pytest.raises(ToolError, match="not allowed"):
        await http.http_get("http://example.org/")


@needs_shell
async def test_shell_exec_runs_confined(workspace: Path, tmp_path: Path) -> None:
    shell = ShellTools(workspace, names="oasis")
    (tmp_path / "secret.txt").write_text("top secret")
    result = await execute_plan(
        {
            "steps": [
                {"id": "ok", "tool": "shell_exec", "arguments": {"command": "echo hi > out.txt && cat out.txt"}},
                {"id": "no", "tool": "shell_exec", "arguments": {"command": f"cat {tmp_path}/secret.txt"}},
            ]
        },
        [shell],
    )
    assert result.steps["ok"].output["stdout"] == "hi\n"
    refused = result.steps["no"]
    assert not refused.ok and refused.tool == "shell_exec" and "top secret" not in str(refused.output)
