"""File metadata outside the workspace: the code cannot chmod, chown, utime or set xattrs on it.

Landlock does not control metadata changes, and the child runs as the host's user (root, here), so a
path-based ``chmod``/``utime`` would otherwise reach any file its owner could change. The child gets
the shell's protection (``_confine.confine``): a read-only root in a private mount namespace (EROFS),
or where that namespace cannot be had, seccomp refusing the calls (EPERM). These tests run without the
audit hook (as code that got past it would) and go around Python's ``os`` functions with raw
syscalls through ctypes, on O_PATH descriptors and through ioctls; then they check the files with the
host's own eyes (mode, owner, times including ctime, xattrs).
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

import pytest
from sandbox_fakes import FakeTools

import toolplan.sandbox._platform as platform_module
from toolplan import SandboxError
from toolplan.sandbox import SubprocessRunner

X86_64 = platform.machine() in ("x86_64", "AMD64")
STDLIB_FILE = os.path.realpath(os.__file__)  # outside the workspace, readable in the sandbox

# The attacks: each outcome is "ok" (the call succeeded), an errno name, or "skipped: ..." (a step it
# needs was refused first). Inputs: ``target`` (a file outside the workspace), ``folder`` (the
# directory holding it), ``readable`` (a file outside the workspace the code may open for reading).
ATTACKS = r"""
import ctypes, errno, os, platform

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
outcomes = {}

def attempt(name, action):
    ctypes.set_errno(0)
    try:
        got = action()
    except OSError as exc:
        outcomes[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        return
    if isinstance(got, int) and got < 0:  # a raw call: -1 and errno
        outcomes[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    else:
        outcomes[name] = "ok"

def raw(number, *args):
    return lambda: libc.syscall(ctypes.c_long(number), *args)

L = ctypes.c_long
st = os.stat(target)
uid, gid = st.st_uid, st.st_gid
t, f = target.encode(), folder.encode()

attempt("os.chmod", lambda: os.chmod(target, 0o777))
attempt("os.chmod(folder)", lambda: os.chmod(folder, 0o777))
attempt("os.chown", lambda: os.chown(target, uid, gid))
attempt("os.lchown", lambda: os.lchown(target, uid, gid))
attempt("os.utime", lambda: os.utime(target, (0, 0)))
attempt("os.utime(folder)", lambda: os.utime(folder, (0, 0)))
attempt("os.setxattr", lambda: os.setxattr(target, "user.toolplan", b"x"))
attempt("os.removexattr", lambda: os.removexattr(target, "user.host"))

if platform.machine() in ("x86_64", "AMD64"):
    attempt("chmod(2)", raw(90, t, L(0o777)))
    attempt("fchmodat(2)", raw(268, L(AT_FDCWD), t, L(0o777)))
    attempt("utimes(2) folder", raw(235, f, None))
    attempt("setxattr(2)", raw(188, t, b"user.toolplan_raw", b"x", L(1), L(0)))
    try:
        path_fd = os.open(target, os.O_PATH)  # Landlock does not govern O_PATH descriptors
    except OSError as exc:
        path_fd = None
        skipped = "skipped: O_PATH open " + errno.errorcode.get(exc.errno, "")
    for name, call in (
        ("fchmodat2(2) O_PATH", lambda fd: raw(452, L(fd), b"", L(0o777), L(AT_EMPTY_PATH))),
        ("fchownat(2) O_PATH", lambda fd: raw(260, L(fd), b"", L(uid), L(gid), L(AT_EMPTY_PATH))),
        ("utimensat(2) O_PATH", lambda fd: raw(280, L(fd), b"", None, L(AT_EMPTY_PATH))),
    ):
        if path_fd is None:
            outcomes[name] = skipped
        else:
            attempt(name, call(path_fd))
    attr = ctypes.create_string_buffer(24)  # struct file_attr (Linux 6.17+)
    if libc.syscall(ctypes.c_long(468), L(AT_FDCWD), t, attr, L(24), L(0)) == 0:
        xflags = (int.from_bytes(attr.raw[:8], "little") & 0x7FFFFFFF) | 0x80  # + FS_XFLAG_NODUMP
        attr = ctypes.create_string_buffer(xflags.to_bytes(8, "little") + attr.raw[8:], 24)
        attempt("file_setattr(2)", raw(469, L(AT_FDCWD), t, attr, L(24), L(0)))
    else:
        outcomes["file_setattr(2)"] = "skipped: file_getattr " + errno.errorcode.get(ctypes.get_errno(), "")
    fd = os.open(readable, os.O_RDONLY)  # a file outside the workspace the code may read
    flags = ctypes.c_long(0)
    if libc.ioctl(fd, ctypes.c_ulong(0x80086601), ctypes.byref(flags)) == 0:  # FS_IOC_GETFLAGS
        # The same flags back: harmless if it went through, and a success all the same.
        attempt("ioctl FS_IOC_SETFLAGS", lambda: libc.ioctl(fd, ctypes.c_ulong(0x40086602), ctypes.byref(flags)))
    else:
        outcomes["ioctl FS_IOC_SETFLAGS"] = "skipped: FS_IOC_GETFLAGS " + errno.errorcode.get(ctypes.get_errno(), "")
    os.close(fd)

set_result(outcomes)
"""

REFUSED = {"EPERM", "EROFS", "EACCES"}
ABSENT = {"ENOSYS", "EOPNOTSUPP", "ENOTTY"}  # a call or feature this kernel or file system lacks
CORE = ("os.chmod", "os.chmod(folder)", "os.chown", "os.utime", "os.utime(folder)", "os.setxattr")

Fingerprint = tuple[int, int, int, int, int, dict[str, bytes]]


def fingerprint(path: str) -> Fingerprint:
    """What the host sees of a file's metadata: mode, owner, group, mtime, ctime and xattrs."""
    st = os.stat(path)
    try:
        xattrs = {name: os.getxattr(path, name) for name in os.listxattr(path)}
    except OSError:
        xattrs = {}
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, xattrs


@pytest.fixture
def victims(tmp_path: Path) -> dict[str, str]:
    """A file and its directory outside any workspace (as the other directory in /tmp of the finding)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir(mode=0o700)
    target = folder / "secret.txt"
    target.write_text("top secret")
    target.chmod(0o600)
    with contextlib.suppress(OSError):  # no user xattrs on this file system: removexattr has none to remove
        os.setxattr(target, "user.host", b"kept")
    return {"target": str(target), "folder": str(folder)}


async def _layers(runner: SubprocessRunner, tools: FakeTools) -> tuple[str, ...]:
    result = await runner.run("pass", call_tool=tools)
    assert result.error is None, result.error
    return runner.layers


def test_the_attacks_change_metadata_when_unconfined(victims: dict[str, str], tmp_path: Path) -> None:
    """The attacks are real: run in the test process on a scratch file, each one goes through."""
    readable = tmp_path / "readable.txt"
    readable.write_text("r")
    got: dict[str, Any] = {}
    namespace: dict[str, Any] = {**victims, "readable": str(readable), "set_result": got.update}
    exec(compile(ATTACKS, "<attacks>", "exec"), namespace)
    assert all(got[name] == "ok" for name in CORE), got
    for name, outcome in got.items():
        assert outcome == "ok" or outcome in ABSENT or outcome.startswith("skipped"), (name, outcome)


RO_ROOT = SubprocessRunner(audit_hook=False)
SECCOMP_ONLY = SubprocessRunner(audit_hook=False, mount_namespace=False)


@pytest.mark.parametrize(
    ("runner", "layer", "expected"),
    [(RO_ROOT, "read_only_root", "EROFS"), (SECCOMP_ONLY, "no_metadata_calls", "EPERM")],
    ids=["read-only-root", "seccomp-without-mount-namespace"],
)
async def test_metadata_outside_cannot_change_past_the_audit_hook(
    runner: SubprocessRunner, layer: str, expected: str, tools: FakeTools, victims: dict[str, str]
) -> None:
    if layer not in await _layers(runner, tools):
        pytest.skip(f"this machine does not offer {layer}: {runner.layers}")
    readable = STDLIB_FILE
    watched = [victims["target"], victims["folder"], readable]
    before = [fingerprint(path) for path in watched]

    result = await runner.run(ATTACKS, call_tool=tools, inputs={**victims, "readable": readable})

    assert result.error is None, result.error
    outcomes: dict[str, str] = result.result
    assert [name for name, outcome in outcomes.items() if outcome == "ok"] == [], outcomes
    for name, outcome in outcomes.items():
        assert outcome in REFUSED or outcome in ABSENT or outcome.startswith("skipped"), (name, outcome)
    assert all(outcomes[name] == expected for name in CORE), outcomes
    if X86_64:
        assert outcomes["chmod(2)"] == outcomes["fchmodat2(2) O_PATH"] == expected, outcomes
    assert [fingerprint(path) for path in watched] == before


async def test_the_read_only_root_cannot_be_undone(tools: FakeTools, victims: dict[str, str]) -> None:
    if not X86_64:
        pytest.skip("raw x86-64 syscall numbers")
    if "read_only_root" not in await _layers(RO_ROOT, tools):
        pytest.skip(f"no read-only root here: {RO_ROOT.layers}")
    code = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
def err(rc):
    return "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
clear_rdonly = ctypes.create_string_buffer((0).to_bytes(8, "little") + (1).to_bytes(8, "little") + bytes(16), 32)
got = {
    "mount_setattr / -rdonly": err(libc.syscall(L(442), L(-100), b"/", L(0x8000), clear_rdonly, L(32))),
    "remount / rw": err(libc.mount(None, b"/", None, L(32 | 4096), None)),  # MS_REMOUNT | MS_BIND
    "umount workspace": err(libc.umount2(os.getcwd().encode(), L(2))),  # MNT_DETACH
    "unshare mount ns": err(libc.unshare(L(0x00020000))),
}
try:
    os.chmod(target, 0o777)
    got["chmod after"] = "ok"
except OSError as exc:
    got["chmod after"] = errno.errorcode[exc.errno]
set_result(got)
"""
    before = fingerprint(victims["target"])
    result = await RO_ROOT.run(code, call_tool=tools, inputs=victims)
    assert result.error is None, result.error
    assert set(result.result.values()) <= REFUSED, result.result
    assert result.result["chmod after"] == "EROFS"
    assert fingerprint(victims["target"]) == before


async def test_the_audit_hook_refuses_metadata_changes_with_a_message(
    tools: FakeTools, victims: dict[str, str]
) -> None:
    before = fingerprint(victims["target"])
    for call in ("os.chmod(target, 0o777)", "os.utime(folder, (0, 0))", "os.setxattr(target, 'user.x', b'1')"):
        result = await SubprocessRunner().run(f"import os\n{call}", call_tool=tools, inputs=victims)
        assert result.error is not None and "Sandbox: writing" in result.error, result.error
    assert fingerprint(victims["target"]) == before


NORMAL_RUN = """
import json, os, shutil, time
os.makedirs("out/nested", exist_ok=True)
with open("data.json", "w") as f:
    json.dump({"rows": [1, 2, 3]}, f)
os.chmod("data.json", 0o640)
os.utime("data.json", (1_000_000_000, 1_000_000_000))
shutil.copy2("data.json", "out/nested/copy.json")  # copies mode and times: chmod and utime again
weather = call_tool("get_weather", {"city": "Rome"})
both = call_tools_parallel([("get_weather", {"city": "Oslo"}), ("fail", {})])
print("cities:", weather["city"], both[0]["city"])
st = os.stat("out/nested/copy.json")
set_result({
    "rows": json.load(open("out/nested/copy.json"))["rows"],
    "mode": oct(st.st_mode & 0o777),
    "mtime": int(st.st_mtime),
    "failed": type(both[1]).__name__,
    "input": given,
})
"""


async def test_a_normal_run_keeps_everything_code_mode_does(tools: FakeTools) -> None:
    runner = SubprocessRunner()
    if "read_only_root" not in await _layers(runner, tools):
        pytest.skip(f"no private mount namespace here (chmod in the workspace is refused): {runner.layers}")
    tools.calls.clear()
    result = await runner.run(NORMAL_RUN, call_tool=tools, inputs={"given": {"n": 1}})
    assert result.error is None, result.error
    assert result.result == {
        "rows": [1, 2, 3],
        "mode": "0o640",
        "mtime": 1_000_000_000,
        "failed": "ToolCallError",
        "input": {"n": 1},
    }
    assert result.logs == "cities: Rome Oslo\n"
    assert result.tool_calls == 3 and [name for name, _ in tools.calls] == ["get_weather", "get_weather", "fail"]
    assert {"rlimits", "read_only_root", "no_capabilities", "audit_hook"} <= set(runner.layers)


async def test_without_a_mount_namespace_the_workspace_loses_metadata_calls_too(tools: FakeTools) -> None:
    runner = SubprocessRunner(mount_namespace=False)
    code = """
open("a.txt", "w").write("kept")
set_result(call_tool("get_weather", {"city": "Rome"})["city"])
import os
os.chmod("a.txt", 0o600)
"""
    result = await runner.run(code, call_tool=tools)
    assert result.result == "Rome"
    if "no_metadata_calls" not in runner.layers:
        pytest.skip(f"no seccomp here: {runner.layers}")
    assert result.error is not None and "PermissionError" in result.error and "read_only_root" not in runner.layers


async def test_a_required_mount_namespace_that_is_not_permitted_is_a_sandbox_error(
    tools: FakeTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def nothing(*, net: bool, mount: bool) -> tuple[str, ...]:
        return ()

    monkeypatch.setattr(platform_module, "namespace_prefix", nothing)
    with pytest.raises(SandboxError, match=r"SubprocessRunner needs a private mount namespace"):
        await SubprocessRunner(mount_namespace=True).run("pass", call_tool=tools)
    result = await SubprocessRunner().run("set_result(1)", call_tool=tools)  # None: runs without
    assert result.result == 1
