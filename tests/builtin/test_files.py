"""FileTools: reading, writing, listing and searching one workspace, and every way out of it refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolplan import ToolError, UserError, execute_plan
from toolplan.builtin import FileTools


@pytest.fixture
def files(workspace: Path) -> FileTools:
    return FileTools(workspace)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret next to the workspace, which no call may read or change."""
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    return secret


# -- what it does ------------------------------------------------------------------------------------
def test_write_read_list_search(files: FileTools, workspace: Path) -> None:
    written = files.write_file("notes/a.txt", "alpha\nBeta gamma\n")
    assert written == {"path": "notes/a.txt", "bytes_written": 17, "size": 17, "created": True}
    assert (workspace / "notes" / "a.txt").read_text() == "alpha\nBeta gamma\n"
    files.write_file("notes/a.txt", "delta\n", mode="append")
    assert files.read_file("notes/a.txt")["content"] == "alpha\nBeta gamma\ndelta\n"
    with pytest.raises(ToolError, match="already exists"):
        files.write_file("notes/a.txt", "x", mode="create")
    files.write_file("notes/b.md", "beta")
    listing = files.list_files(recursive=True)
    assert [(e["path"], e["type"]) for e in listing["entries"]] == [
        ("notes", "directory"),
        ("notes/a.txt", "file"),
        ("notes/b.md", "file"),
    ]
    assert [e["path"] for e in files.list_files("notes", pattern="*.md")["entries"]] == ["notes/b.md"]
    found = files.search_files("BETA")
    assert [(m["path"], m["line"]) for m in found["matches"]] == [("notes/a.txt", 2), ("notes/b.md", 1)]
    assert files.search_files("BETA", case_sensitive=True)["matches"] == []


def test_reads_in_parts_without_splitting_characters(files: FileTools) -> None:
    files.write_file("u.txt", "aé" * 10)  # é is two bytes
    first = files.read_file("u.txt", max_bytes=5)  # a é a and the first byte of the next é
    assert first["content"] == "aéa" and first["truncated"] and first["next_offset"] == 4
    rest = files.read_file("u.txt", offset=first["next_offset"])
    assert first["content"] + rest["content"] == "aé" * 10 and not rest["truncated"]


def test_binary_files(files: FileTools, workspace: Path) -> None:
    (workspace / "b.bin").write_bytes(bytes(range(256)))
    with pytest.raises(ToolError, match=r"not UTF-8 text.*encoding='base64'"):
        files.read_file("b.bin")
    got = files.read_file("b.bin", encoding="base64")
    files.write_file("copy.bin", got["content"], encoding="base64")
    assert (workspace / "copy.bin").read_bytes() == bytes(range(256))
    with pytest.raises(ToolError, match="not valid base64"):
        files.write_file("x.bin", "not base64!", encoding="base64")


def test_absolute_paths_inside_the_workspace_are_accepted(files: FileTools, workspace: Path) -> None:
    files.write_file(str(workspace / "abs.txt"), "ok")
    assert files.read_file(f"{os.path.realpath(workspace)}/abs.txt")["content"] == "ok"


def test_annotations_and_options(workspace: Path) -> None:
    tools = {d.name: d.annotations for d in FileTools(workspace).definitions()}
    assert set(tools) == {"read_file", "list_files", "search_files", "write_file"}
    for name in ("read_file", "list_files", "search_files"):
        assert tools[name].read_only and tools[name].idempotent and not tools[name].destructive
    assert tools["write_file"].destructive and not tools["write_file"].read_only and not tools["write_file"].idempotent
    assert "write_file" not in [d.name for d in FileTools(workspace, read_only=True).definitions()]
    assert next(d.name for d in FileTools(workspace, prefix="ws_").definitions()) == "ws_read_file"
    with pytest.raises(UserError, match="not a directory"):
        FileTools(workspace / "missing")


async def test_in_a_plan(workspace: Path) -> None:
    plan = {
        "steps": [
            {"id": "w", "tool": "write_file", "arguments": {"path": "in.csv", "content": "a,b\n1,2\n"}},
            {"id": "r", "tool": "read_file", "arguments": {"path": "in.csv"}, "depends_on": ["w"]},
            {"id": "bad", "tool": "read_file", "arguments": {"path": "../secret.txt"}},
        ]
    }
    result = await execute_plan(plan, [FileTools(workspace)])
    assert result.steps["r"].output["content"] == "a,b\n1,2\n"
    bad = result.steps["bad"]
    assert bad.status == "failed" and bad.error is not None and bad.error.kind == "business"
    assert "'..'" in bad.error.message


# -- the hostile ones --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "a/../../secret.txt", "..", "/etc/passwd", "//etc/passwd", "a\x00b", "x" * 5000],
)
def test_paths_out_of_the_workspace_are_refused(files: FileTools, outside: Path, path: str) -> None:
    for call in (
        lambda: files.read_file(path),
        lambda: files.write_file(path, "pwned"),
        lambda: files.list_files(path),
        lambda: files.search_files("secret", path=path),
    ):
        with pytest.raises(ToolError):
            call()
    assert outside.read_text() == "top secret"


def test_a_path_through_the_workspace_parent_is_refused(files: FileTools, workspace: Path, outside: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        files.read_file(str(workspace.parent / "secret.txt"))


def test_symlinks_are_never_followed(files: FileTools, workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "linkdir").symlink_to(outside.parent)
    (workspace / "inner.txt").write_text("inner")
    (workspace / "inner-link").symlink_to(workspace / "inner.txt")  # even one that stays inside
    for path in ("link.txt", "linkdir/secret.txt", "inner-link"):
        with pytest.raises(ToolError, match="symbolic link"):
            files.read_file(path)
        with pytest.raises(ToolError, match="symbolic link"):
            files.write_file(path, "pwned")
    with pytest.raises(ToolError, match="symbolic link"):
        files.list_files("linkdir")
    with pytest.raises(ToolError, match="symbolic link"):
        files.write_file("linkdir/new.txt", "pwned")
    assert outside.read_text() == "top secret" and not (outside.parent / "new.txt").exists()
    # Listed as what they are, never entered; never searched.
    listing = {e["path"]: e["type"] for e in files.list_files(recursive=True)["entries"]}
    assert listing == {"inner-link": "symlink", "inner.txt": "file", "link.txt": "symlink", "linkdir": "symlink"}
    assert [m["path"] for m in files.search_files("secret")["matches"]] == []
    assert [m["path"] for m in files.search_files("inner")["matches"]] == ["inner.txt"]


def test_a_hard_link_to_a_file_outside_is_never_written(files: FileTools, workspace: Path, outside: Path) -> None:
    os.link(outside, workspace / "linked.txt")
    for mode in ("overwrite", "append"):
        with pytest.raises(ToolError, match="2 hard links"):
            files.write_file("linked.txt", "pwned", mode=mode)
    assert outside.read_text() == "top secret"
    assert files.write_file("fresh.txt", "ok")["created"]


def test_a_huge_offset_is_a_business_error(files: FileTools, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello")
    assert files.read_file("a.txt", offset=2**63 - 1, max_bytes=0)["content"] == ""
    for offset in (2**63, 2**70, -1):
        with pytest.raises(ToolError, match="offset must be between 0 and"):
            files.read_file("a.txt", offset=offset, max_bytes=0)


async def test_a_huge_offset_in_a_plan_fails_once(files: FileTools, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello")
    plan = {
        "steps": [{"id": "r", "tool": "read_file", "arguments": {"path": "a.txt", "offset": 2**70, "max_bytes": 0}}]
    }
    step = (await execute_plan(plan, [files], retry_delay=0)).steps["r"]
    assert step.status == "failed" and step.error is not None and step.error.kind == "business"
    assert step.attempts == 1


def test_a_symlink_swapped_in_for_a_directory_is_refused(files: FileTools, workspace: Path, outside: Path) -> None:
    files.write_file("d/file.txt", "inside")
    (workspace / "d" / "file.txt").unlink()
    (workspace / "d").rmdir()
    (workspace / "d").symlink_to(outside.parent)  # what a racing process would do between two calls
    with pytest.raises(ToolError, match="symbolic link"):
        files.read_file("d/secret.txt")


def test_fifos_and_devices_are_refused_without_blocking(files: FileTools, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        files.read_file("pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        files.write_file("pipe", "x")
    if os.geteuid() == 0:
        os.mknod(workspace / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with pytest.raises(ToolError, match="not a regular file"):
            files.read_file("null")
    assert files.search_files("x")["matches"] == []


def test_directories_are_not_files(files: FileTools, workspace: Path) -> None:
    (workspace / "d").mkdir()
    with pytest.raises(ToolError, match="directory"):
        files.read_file("d")
    with pytest.raises(ToolError, match="directory"):
        files.write_file("d", "x")
    with pytest.raises(ToolError, match="workspace directory itself"):
        files.read_file(".")
    files.write_file("x", "1")
    with pytest.raises(ToolError, match="not a directory"):
        files.list_files("x")
    with pytest.raises(ToolError, match="not a directory"):
        files.write_file("x/y.txt", "1")


def test_size_limits(workspace: Path) -> None:
    files = FileTools(workspace, max_read_bytes=1000, max_write_bytes=100, max_list_entries=5)
    (workspace / "big.txt").write_text("y" * 5000)
    got = files.read_file("big.txt")
    assert got["bytes_read"] == 1000 and got["truncated"] and got["size"] == 5000
    with pytest.raises(ToolError, match="101 bytes; one write takes at most 100"):
        files.write_file("w.txt", "z" * 101)
    assert not (workspace / "w.txt").exists()
    for i in range(20):
        (workspace / f"f{i:02}.txt").write_text("needle")
    listing = files.list_files()
    assert len(listing["entries"]) == 5 and listing["truncated"]
    search = files.search_files("y")  # big.txt is larger than the read limit: skipped and counted
    assert search["files_skipped"] == 1 and search["matches"] == []


def test_search_limits(workspace: Path) -> None:
    files = FileTools(workspace, max_search_matches=3)
    (workspace / "many.txt").write_text("hit\n" * 10)
    (workspace / "bin.dat").write_bytes(b"hit\x00hit")
    (workspace / ".hidden").write_text("hit")
    got = files.search_files("hit")
    assert len(got["matches"]) == 3 and got["truncated"] and got["files_skipped"] == 1
    with pytest.raises(ToolError, match="one line"):
        files.search_files("a\nb")


def test_deep_trees_are_bounded(workspace: Path) -> None:
    files = FileTools(workspace, max_depth=3)
    deep = workspace
    for i in range(10):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    paths = [e["path"] for e in files.list_files(recursive=True)["entries"]]
    assert paths == ["d0", "d0/d1", "d0/d1/d2"]
