"""Hostile code: each attempt is refused or killed with a clear message, and the host is unharmed.

The subprocess runner is tested with all layers, with the kernel layers alone (no audit hook) and with
the audit hook alone (no Landlock, seccomp, network or mount namespace), so each layer is shown to
hold. File metadata (chmod, chown, utime, xattrs) has tests of its own in ``test_metadata``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_fakes import HAS_MONTY, FakeTools

from toolplan.sandbox import CodeLimits, CodeRunner, MontyRunner, SubprocessRunner

FULL = SubprocessRunner()
KERNEL_ONLY = SubprocessRunner(audit_hook=False)
HOOK_ONLY = SubprocessRunner(landlock=False, seccomp=False, network_namespace=False, mount_namespace=False)


def _layers() -> Iterator[Any]:
    yield pytest.param(FULL, id="all-layers")
    yield pytest.param(KERNEL_ONLY, id="kernel-only")
    yield pytest.param(HOOK_ONLY, id="audit-hook-only")


@pytest.fixture(params=list(_layers()))
def confined(request: pytest.FixtureRequest) -> SubprocessRunner:
    r: SubprocessRunner = request.param
    return r


def _refused(error: str | None) -> bool:
    """Refused by the audit hook or Landlock (PermissionError), seccomp (EPERM) or the read-only root (EROFS)."""
    return error is not None and any(
        sign in error for sign in ("PermissionError", "Operation not permitted", "Read-only file system")
    )


# -- files --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "code",
    [
        'open("/etc/passwd").read()',
        f"import os; os.listdir({str(Path.home())!r})",
        'import os; os.listdir("/root")',
        'open("/proc/1/environ").read()',
        'import os; os.symlink("/etc/passwd", "link"); open("link").read()',
        'open("/etc/hostname", "rb").read()',
    ],
    ids=["etc-passwd", "host-home", "root-home", "proc-environ", "symlink-escape", "binary-read"],
)
async def test_reading_outside_the_workspace_is_refused(
    confined: SubprocessRunner, tools: FakeTools, code: str
) -> None:
    result = await confined.run(code, call_tool=tools)
    assert _refused(result.error), result.error


async def test_writing_outside_the_workspace_is_refused(
    confined: SubprocessRunner, tools: FakeTools, tmp_path: Path
) -> None:
    target = tmp_path / "pwned.txt"
    result = await confined.run(f"open({str(target)!r}, 'w').write('x')", call_tool=tools)
    assert _refused(result.error), result.error
    assert not target.exists()


async def test_workspace_is_writable_and_removed_afterwards(tools: FakeTools) -> None:
    code = """
import os
with open("notes.txt", "w") as f:
    f.write("kept")
set_result({"cwd": os.getcwd(), "text": open("notes.txt").read(), "files": os.listdir(".")})
"""
    result = await FULL.run(code, call_tool=tools)
    assert result.error is None, result.error
    assert result.result["text"] == "kept" and result.result["files"] == ["notes.txt"]
    assert not await asyncio.to_thread(os.path.exists, result.result["cwd"])


async def test_environment_is_scrubbed(tools: FakeTools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = await FULL.run("import os; set_result(dict(os.environ))", call_tool=tools)
    assert "OPENAI_API_KEY" not in result.result
    assert "sk-secret" not in str(result.result)


# -- processes and native code -----------------------------------------------------------------------
async def test_os_system_does_not_run(confined: SubprocessRunner, tools: FakeTools) -> None:
    code = 'import os\nstatus = os.system("echo owned > owned.txt")\nset_result([status, os.listdir(".")])'
    result = await confined.run(code, call_tool=tools)
    if result.error is None:  # seccomp alone: libc reports the refused clone as exit status 127
        assert result.result == [127 << 8, []]
    else:
        assert _refused(result.error), result.error


@pytest.mark.parametrize(
    "code",
    [
        'import subprocess; subprocess.run(["id"])',
        'import os; os.popen("id").read()',
        'import os; os.execv("/bin/sh", ["sh", "-c", "id"])',
        'import os; os.posix_spawn("/bin/true", ["true"], {})',
        "import os\nwhile True:\n    os.fork()",
        "import os; os.kill(1, 0)",
    ],
    ids=["subprocess", "os.popen", "os.execv", "posix_spawn", "fork-bomb", "signal-init"],
)
async def test_process_creation_is_refused(confined: SubprocessRunner, tools: FakeTools, code: str) -> None:
    result = await confined.run(code, call_tool=tools)
    assert _refused(result.error), result.error


async def test_ctypes_is_refused_by_the_hook(tools: FakeTools) -> None:
    result = await FULL.run("import ctypes; ctypes.CDLL(None)", call_tool=tools)
    assert _refused(result.error) and "ctypes" in str(result.error)


async def test_ctypes_without_the_hook_still_cannot_exec_or_fork(tools: FakeTools) -> None:
    code = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
set_result([libc.fork(), libc.execv(b"/bin/sh", None), ctypes.get_errno()])
"""
    result = await KERNEL_ONLY.run(code, call_tool=tools)
    assert result.result == [-1, -1, 1]  # EPERM from seccomp


# -- network ------------------------------------------------------------------------------------------
async def test_socket_to_host_listener_gets_no_connection(confined: SubprocessRunner, tools: FakeTools) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    code = f"""
import socket
s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
set_result("connected")
"""
    try:
        result = await confined.run(code, call_tool=tools)
        assert result.result != "connected"
        assert result.error is not None
        # A completed connection would already sit in the accept queue.
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# -- resource limits ----------------------------------------------------------------------------------
async def test_memory_bomb_is_stopped(tools: FakeTools) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))"
    result = await FULL.run(code, call_tool=tools, limits=CodeLimits(memory=128 * 2**20))
    assert result.limit == "memory", result.error
    assert "memory" in str(result.error)


async def test_huge_output_is_capped(runner: CodeRunner, tools: FakeTools) -> None:
    limits = CodeLimits(max_output=1000)
    result = await runner.run('while True:\n    print("x" * 100)', call_tool=tools, limits=limits)
    assert result.limit == "output"
    assert "bytes of output dropped" in result.logs
    assert len(result.logs) < 1200


async def test_output_under_the_kill_ceiling_is_truncated_not_killed(runner: CodeRunner, tools: FakeTools) -> None:
    code = 'for i in range(100):\n    print("line", i)\nset_result("done")'
    result = await runner.run(code, call_tool=tools, limits=CodeLimits(max_output=200))
    assert result.result == "done" and result.limit is None
    assert result.logs.startswith("line 0\n") and result.logs.endswith("line 99\n")
    assert "dropped" in result.logs


async def test_huge_result_message_kills_with_message_size(runner: CodeRunner, tools: FakeTools) -> None:
    limits = CodeLimits(memory=768 * 2**20)
    result = await runner.run('set_result("x" * 50_000_000)', call_tool=tools, limits=limits)
    assert result.limit == "message_size", result.error
    assert not result.result_set


async def test_huge_tool_arguments_kill_with_message_size(runner: CodeRunner, tools: FakeTools) -> None:
    limits = CodeLimits(memory=512 * 2**20, max_message_bytes=2**20)
    result = await runner.run('call_tool("record", {"data": "x" * 5_000_000})', call_tool=tools, limits=limits)
    assert result.limit == "message_size"
    assert tools.calls == []


async def test_large_messages_both_ways_do_not_deadlock(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
big = call_tool("blob", {"size": 20_000_000})
set_result({"got": len(big), "echo": big[:4_000_000]})
"""
    result = await runner.run(code, call_tool=tools, limits=CodeLimits(memory=1024 * 2**20))
    assert result.error is None, result.error
    assert result.result["got"] == 20_000_000 and len(result.result["echo"]) == 4_000_000


async def test_too_many_tool_calls(runner: CodeRunner, tools: FakeTools) -> None:
    code = 'for i in range(10):\n    call_tool("record", {"i": i})'
    result = await runner.run(code, call_tool=tools, limits=CodeLimits(max_tool_calls=3))
    assert result.limit == "tool_calls"
    assert len(tools.records) == 3


async def test_tool_that_hangs_hits_wall_time(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run('call_tool("hang")', call_tool=tools, limits=CodeLimits(wall_time=1))
    assert result.limit == "wall_time"
    assert "wall time" in str(result.error)


@pytest.mark.slow
async def test_infinite_loop_hits_wall_time(runner: CodeRunner, tools: FakeTools) -> None:
    limits = CodeLimits(wall_time=3, cpu_time=60)
    result = await runner.run("while True:\n    pass", call_tool=tools, limits=limits)
    assert result.limit == "wall_time"


@pytest.mark.slow
async def test_infinite_loop_hits_cpu_time(runner: CodeRunner, tools: FakeTools) -> None:
    limits = CodeLimits(wall_time=30, cpu_time=1)
    result = await runner.run("while True:\n    pass", call_tool=tools, limits=limits)
    assert result.limit == "cpu_time"


# -- cancellation -------------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def _exited(pid: int) -> bool:
    """Wait (on a pidfd, an event) for a process that is not our child to exit; False after 10 s."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(fd, gone.set)
    try:
        async with asyncio.timeout(10):
            await gone.wait()
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _monty_workers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if comm == "monty" and int(rest[1]) == os.getpid() and rest[0] != "Z":
            found.append(int(entry.name))
    return found


async def test_cancel_kills_the_subprocess(tools: FakeTools) -> None:
    code = 'import os\ncall_tool("record", {"pid": os.getpid()})\nwhile True:\n    pass'
    task = asyncio.create_task(FULL.run(code, call_tool=tools))
    await tools.recorded.wait()
    pid = tools.records[0]["pid"]
    assert _alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pid)


@pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
async def test_cancel_kills_the_monty_worker(tools: FakeTools) -> None:
    task = asyncio.create_task(MontyRunner().run('call_tool("record")\nwhile True:\n    pass', call_tool=tools))
    await tools.recorded.wait()
    workers = _monty_workers()
    assert workers
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for pid in workers:
        assert await _exited(pid)


async def test_host_is_unharmed_after_hostile_runs(tools: FakeTools) -> None:
    result = await FULL.run('set_result(call_tool("get_weather", {"city": "Rome"}))', call_tool=tools)
    assert result.result["city"] == "Rome"


# -- Monty specifics ----------------------------------------------------------------------------------
@pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
@pytest.mark.parametrize(
    "code",
    [
        'open("/etc/passwd").read()',
        "import os; os.system('id')",
        "import subprocess",
        "import socket",
        "import ctypes",
        'from pathlib import Path; Path("/etc/passwd").read_text()',
        'import os; os.getenv("HOME")',
    ],
)
async def test_monty_has_no_way_out(tools: FakeTools, code: str) -> None:
    result = await MontyRunner().run(code, call_tool=tools)
    assert result.error is not None


@pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
async def test_monty_memory_bomb(tools: FakeTools) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append('x' * 10**6)"
    result = await MontyRunner().run(code, call_tool=tools, limits=CodeLimits(memory=64 * 2**20))
    assert result.limit == "memory"


async def test_unknown_function_in_monty_is_a_name_error(tools: FakeTools) -> None:
    if not HAS_MONTY:
        pytest.skip("pydantic-monty not installed")
    result = await MontyRunner().run("os_system('rm -rf /')", call_tool=tools)
    assert result.error is not None and "NameError" in result.error
