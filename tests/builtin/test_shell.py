"""ShellTools: commands run confined to the workspace, and every way out of it refused.

Each test runs real commands through the launcher and the kernel layers (Landlock, seccomp, a
read-only root in a private mount namespace, no capabilities); skipped where the machine has none.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from builtin_support import needs_shell

import toolplan.builtin._shell as shell_module
from toolplan import SandboxError, ToolError, execute_plan
from toolplan.builtin import ShellLimits, ShellTools

pytestmark = needs_shell
HAS_PYTHON3 = shutil.which("python3", path="/usr/bin:/bin") is not None


@pytest.fixture
def shell(workspace: Path) -> ShellTools:
    return ShellTools(workspace, limits=ShellLimits(wall_time=20))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o600)
    return secret


def fingerprint(path: Path) -> tuple[str, int, int, int]:
    """What a file outside the workspace looks like: content, mode, mtime and link count."""
    st = path.stat()
    return path.read_text(), st.st_mode, st.st_mtime_ns, st.st_nlink


async def run(shell: ShellTools, command: str, **kwargs: object) -> tuple[int, str, str]:
    got = await shell.run_shell(command, check=False, **kwargs)  # type: ignore[arg-type]
    return got["exit_code"], got["stdout"], got["stderr"]


# -- what it does ------------------------------------------------------------------------------------
async def test_commands_run_in_the_workspace(shell: ShellTools, workspace: Path) -> None:
    code, out, _ = await run(shell, "pwd; printf 'b\\na\\nb\\n' > x.txt; sort x.txt | uniq -c | wc -l")
    assert code == 0 and out.split() == [shell.workspace, "2"]
    assert (workspace / "x.txt").read_text() == "b\na\nb\n"
    assert {"landlock", "seccomp", "rlimits", "no_capabilities"} <= set(shell.layers)


async def test_stdin_exit_status_and_check(shell: ShellTools) -> None:
    assert (await shell.run_shell("tr a-z A-Z", stdin="hello"))["stdout"] == "HELLO"
    with pytest.raises(ToolError, match=r"exited with status 3.*boom.*check=false"):
        await shell.run_shell("echo boom >&2; exit 3")
    assert await run(shell, "exit 3") == (3, "", "")


async def test_environment_is_scrubbed(shell: ShellTools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLPLAN_TEST_SECRET", "hunter2")
    _, out, _ = await run(shell, "env")
    assert "hunter2" not in out and "HOME=" in out


def test_annotations(workspace: Path) -> None:
    (definition,) = ShellTools(workspace, max_parallel=2).definitions()
    a = definition.annotations
    assert definition.name == "run_shell" and a.destructive and not a.read_only and not a.idempotent
    assert a.concurrency == 2


async def test_in_a_plan_with_the_files_tools(workspace: Path) -> None:
    from toolplan.builtin import FileTools

    plan = {
        "steps": [
            {"id": "write", "tool": "write_file", "arguments": {"path": "n.txt", "content": "3\n1\n2\n"}},
            {"id": "sort", "tool": "run_shell", "arguments": {"command": "sort -n n.txt"}, "depends_on": ["write"]},
        ],
        "output_steps": ["sort"],
    }
    result = await execute_plan(plan, [FileTools(workspace), ShellTools(workspace)])
    assert result.outputs["sort"]["stdout"] == "1\n2\n3\n"


# -- escapes -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        "cat {secret}",
        "cat /etc/passwd",
        "ls {home}",
        "ls ..",
        "cat /proc/1/environ",
        "ln -s {secret} link && cat link",  # a symlink made inside points out: still refused
        "ln {secret} hard",  # a hard link to a file outside
        "echo pwned > {secret}",
        "touch {secret}",
        "chmod 777 {secret}",
        "mv {secret} ./stolen",
        "echo x > /tmp/toolplan-shell-escape",
    ],
)
async def test_files_outside_the_workspace_are_out_of_reach(shell: ShellTools, outside: Path, command: str) -> None:
    before = fingerprint(outside)
    code, out, _ = await run(shell, command.format(secret=outside, home=Path.home()))
    assert code != 0 and "top secret" not in out
    assert fingerprint(outside) == before
    assert not os.path.lexists("/tmp/toolplan-shell-escape")  # noqa: ASYNC240


async def test_metadata_outside_is_refused_without_a_mount_namespace(workspace: Path, outside: Path) -> None:
    shell = ShellTools(workspace, mount_namespace=False)
    before = fingerprint(outside)
    for command in (f"chmod 777 {outside}", f"touch {outside}", f"touch -m -d 2001-01-01 {outside}"):
        code, _, err = await run(shell, command)
        assert code != 0 and ("Operation not permitted" in err or "Permission denied" in err)
    assert "read_only_root" not in shell.layers
    assert fingerprint(outside) == before


@pytest.mark.skipif(shutil.which("chattr", path="/usr/bin:/bin") is None, reason="no chattr here")
@pytest.mark.parametrize("mount_namespace", [None, False], ids=["read-only-root", "seccomp-only"])
async def test_inode_flags_of_system_files_cannot_change(workspace: Path, mount_namespace: bool | None) -> None:
    """chattr's ioctl works on a file opened read-only, and the shell may read /usr: still refused."""
    shell = ShellTools(workspace, mount_namespace=mount_namespace)
    # -d clears the nodump flag, which a system program does not have: a no-op had it gone through.
    code, _, err = await run(shell, "chattr -d /usr/bin/true")
    if "Inappropriate ioctl" in err or "not supported" in err:
        pytest.skip(f"no inode flags on this file system: {err}")
    assert code != 0 and ("Operation not permitted" in err or "Read-only file system" in err), err


async def test_dropped_programs_cannot_be_executed(shell: ShellTools) -> None:
    code, _, err = await run(shell, "cp /bin/true ./mytrue && chmod +x mytrue && ./mytrue")
    assert code != 0 and "Permission denied" in err


@pytest.mark.skipif(not HAS_PYTHON3, reason="no python3 in /usr/bin")
@pytest.mark.parametrize(
    "code",
    [
        "import socket; socket.socket()",
        "import socket; socket.create_connection(('127.0.0.1', 1))",
        "import urllib.request; urllib.request.urlopen('http://192.0.2.1/')",
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('/run/docker.sock')",
    ],
)
async def test_no_network(shell: ShellTools, code: str) -> None:
    status, _, err = await run(shell, f'python3 -c "{code}"')
    assert status != 0 and ("Operation not permitted" in err or "PermissionError" in err)


@pytest.mark.parametrize(
    "command",
    [
        "setsid sleep 1",
        "unshare -r true",
        "unshare -n true",
        "mount -t tmpfs none .",
        "mknod dev c 1 3",
        "chroot . /bin/true",
    ],
)
async def test_no_new_sessions_namespaces_mounts_or_devices(shell: ShellTools, command: str) -> None:
    code, _, _ = await run(shell, command)
    assert code != 0


async def test_host_processes_cannot_be_signalled(shell: ShellTools) -> None:
    victim = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        code, _, _ = await run(shell, f"kill -9 {victim.pid}")
        assert code != 0 and victim.returncode is None
        with pytest.raises(TimeoutError):  # still alive: it does not end within a moment
            await asyncio.wait_for(asyncio.shield(victim.wait()), timeout=0.2)
    finally:
        victim.kill()
        await victim.wait()


def _processes_running(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


async def test_background_processes_die_with_the_command(shell: ShellTools) -> None:
    got = await shell.run_shell("sleep 987654 & sleep 987655 & echo started")
    assert got["stdout"] == "started\n"
    for _ in range(100):  # SIGKILL was sent to the whole group; the kernel reaps them asynchronously
        if not _processes_running("98765"):
            break
        await asyncio.sleep(0.01)
    assert _processes_running("98765") == []


async def test_the_wall_time_kills_the_group(workspace: Path) -> None:
    shell = ShellTools(workspace, limits=ShellLimits(wall_time=0.5))
    with pytest.raises(ToolError, match=r"stopped after 0\.5 s"):
        await shell.run_shell("sleep 987656 & sleep 987657")
    for _ in range(100):
        if not _processes_running("98765"):
            break
        await asyncio.sleep(0.01)
    assert _processes_running("98765") == []


async def test_output_floods_are_cut_and_stopped(workspace: Path) -> None:
    shell = ShellTools(workspace, limits=ShellLimits(max_output=1000))
    got = await shell.run_shell("seq 1 5000")
    assert "bytes of output dropped" in got["stdout"] and got["stdout"].endswith("5000\n")
    with pytest.raises(ToolError, match="printed more than 64000 bytes"):
        await shell.run_shell("yes")


@pytest.mark.skipif(not HAS_PYTHON3, reason="no python3 in /usr/bin")
async def test_memory_and_file_size_limits(workspace: Path) -> None:
    shell = ShellTools(workspace, limits=ShellLimits(memory=256 * 1024 * 1024, max_file_size=1024 * 1024))
    code, _, err = await run(shell, 'python3 -c "x = bytearray(512 * 1024 * 1024)"')
    assert code != 0 and "MemoryError" in err
    code, _, _ = await run(shell, "head -c 2000000 /dev/zero > big")
    assert code != 0 and (workspace / "big").stat().st_size <= 1024 * 1024


async def test_hostile_commands_and_inputs_are_refused_before_running(shell: ShellTools) -> None:
    for command in ("", "   ", "a\x00b", "x" * 40_000):
        with pytest.raises(ToolError):
            await shell.run_shell(command)
    with pytest.raises(ToolError, match="stdin"):
        await ShellTools(shell.workspace, limits=ShellLimits(max_stdin_bytes=10)).run_shell("cat", stdin="y" * 11)


# -- refusing to run unconfined ----------------------------------------------------------------------
async def test_refuses_when_the_machine_cannot_confine(
    shell: ShellTools, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_module, "shell_confinement_problem", lambda: "the kernel offers no Landlock")
    with pytest.raises(
        SandboxError, match=r"refused to run the command: the kernel offers no Landlock\. It never runs"
    ):
        await shell.run_shell("touch ran")
    assert not os.path.lexists(workspace / "ran")  # noqa: ASYNC240


async def test_the_launcher_refuses_when_a_required_layer_is_missing(
    shell: ShellTools, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_module, "_REQUIRED_LAYERS", ("landlock", "seccomp", "a_layer_no_kernel_has"))
    with pytest.raises(SandboxError, match="does not offer a_layer_no_kernel_has"):
        await shell.run_shell("touch ran")
    assert not os.path.lexists(workspace / "ran")  # noqa: ASYNC240


async def test_a_missing_shell_is_a_sandbox_error(workspace: Path) -> None:
    with pytest.raises(SandboxError, match="refused to run"):
        await ShellTools(workspace, shell="/nonexistent/sh").run_shell("true")


def test_the_launcher_is_not_importable_by_accident() -> None:
    assert "toolplan.sandbox._shell_child" not in sys.modules
