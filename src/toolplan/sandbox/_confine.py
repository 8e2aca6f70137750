"""Kernel-level confinement the sandbox child applies to itself before running model code.

Runs inside the child process only (stdlib, no toolplan imports). Every layer is irreversible once
applied: rlimits (with setrlimit/prlimit blocked by seccomp afterwards, so even root cannot raise
them), a read-only root (in a private mount namespace: every mount but the workspace read-only),
no capabilities, Landlock (file-system and TCP access rules), and a seccomp-BPF filter (no exec, no
new processes, no sockets, no ptrace, no namespaces or mounts, no signals to other processes; no file
metadata changes where there is no read-only root). A layer the kernel does not offer is skipped and
reported, never faked.

`confine` applies them all, in order; both sandbox children (code mode's `_child` and the shell's
launcher `_shell_child`) call it, so they are confined by the same code.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import struct
from collections.abc import Iterable

__all__ = (
    "apply_landlock",
    "die_with_parent",
    "apply_rlimits",
    "apply_seccomp",
    "confine",
    "drop_capabilities",
    "landlock_abi",
    "read_only_root",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_PR_SET_NO_NEW_PRIVS = 38


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the process that started this one dies.

    Without it a sandbox whose host is killed (a Ray worker that dies, say) would run on, orphaned,
    until its CPU limit, or for ever if it only sleeps. A host that died before this call has
    closed the channel already, which ends the child at its next message.
    """
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def _no_new_privs() -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def apply_rlimits(*, memory: int, cpu_seconds: int, open_files: int, file_size: int, processes: int = 0) -> None:
    """Set hard and soft limits; the hard CPU limit is one second above the soft one (SIGXCPU first).

    ``processes`` is ``RLIMIT_NPROC``: the kernel counts every process (thread) of the real user, and
    ignores the limit for root. Code mode passes 0 (seccomp forbids new processes anyway).
    """
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAP_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Give up every capability for good: bounding set, ambient set, then the process's own sets.

    After this, a program run as root gets no capability from ``execve`` either (its permitted set
    is limited by the empty bounding set), so root in the sandbox cannot mount, load modules, bypass
    file permissions or make device nodes. A no-op for a process that has no capabilities.
    """
    cap = 0
    while _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 or ctypes.get_errno() == 1:  # EPERM: none to drop
        cap += 1
        if cap > 63:
            break
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("=Ii", _CAP_VERSION_3, 0)
    data = ctypes.create_string_buffer(24)  # two zeroed {effective, permitted, inheritable}
    head = ctypes.create_string_buffer(header, len(header))
    if _libc.syscall(_NR_CAPSET, head, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


# --- mounts ----------------------------------------------------------------------------------------
_NR_MOUNT, _NR_MOUNT_SETATTR = 165, 442
_MS_BIND = 4096
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_MOUNT_ATTR_RDONLY = 0x1


def _mount_setattr(path: str, *, recursive: bool, set_: int = 0, clear: int = 0) -> None:
    attr = ctypes.create_string_buffer(struct.pack("=QQQQ", set_, clear, 0, 0), 32)
    flags = _AT_RECURSIVE if recursive else 0
    if _libc.syscall(_NR_MOUNT_SETATTR, _AT_FDCWD, path.encode(), flags, attr, 32) != 0:
        raise OSError(ctypes.get_errno(), f"mount_setattr({path!r}) failed")


def read_only_root(writable: str) -> None:
    """In a private mount namespace: make every mount read-only except ``writable`` (bind-mounted on itself).

    Landlock controls opening, creating and removing files, but not changing their metadata (chmod,
    chown, utime, xattrs); a read-only mount refuses those too (``EROFS``) everywhere but the
    workspace. The caller must already be in its own mount namespace (``unshare --mount``), with
    private propagation, and able to mount. Changes the working directory to ``writable``.
    """
    path = writable.encode()
    if _libc.syscall(_NR_MOUNT, path, path, None, _MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind mount of {writable!r} failed")
    _mount_setattr("/", recursive=True, set_=_MOUNT_ATTR_RDONLY)
    _mount_setattr(writable, recursive=False, clear=_MOUNT_ATTR_RDONLY)
    os.chdir(writable)  # the old working directory is the directory under the new mount


# --- Landlock -------------------------------------------------------------------------------------
_LL_CREATE_RULESET, _LL_ADD_RULE, _LL_RESTRICT_SELF = 444, 445, 446  # same number on every arch
_LL_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_MAKE_CHAR, _FS_MAKE_BLOCK = 1 << 6, 1 << 11
_FS_ALL_V1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    version = _libc.syscall(_LL_CREATE_RULESET, None, 0, 1)
    return max(int(version), 0)


def apply_landlock(
    *,
    read_only: Iterable[str],
    read_write: Iterable[str],
    allow_network: bool,
    executable: Iterable[str] = (),
    device_nodes: bool = True,
) -> int:
    """Allow reading ``read_only`` trees and everything in ``read_write``; deny all other paths.

    ``executable`` trees may be read and their files executed (nothing else may be executed: not
    even in ``read_write``). ``device_nodes=False`` also forbids making device nodes in ``read_write``.

    Returns the ABI version used (0: not applied). From ABI 4 TCP bind/connect are denied unless
    ``allow_network``; from ABI 6 signals and abstract unix sockets outside the sandbox are denied.
    """
    abi = landlock_abi()
    if abi < 1:
        return 0
    fs_all = _FS_ALL_V1
    if abi >= 2:
        fs_all |= _FS_REFER
    if abi >= 3:
        fs_all |= _FS_TRUNCATE
    if abi >= 5:
        fs_all |= _FS_IOCTL_DEV
    net = 0 if allow_network or abi < 4 else _NET_BIND_TCP | _NET_CONNECT_TCP
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", fs_all, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", fs_all, net)
    else:
        attr = struct.pack("=Q", fs_all)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = int(_libc.syscall(_LL_CREATE_RULESET, buf, len(attr), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        ro = _FS_READ_FILE | _FS_READ_DIR
        rw = fs_all & ~_FS_EXECUTE & ~(0 if device_nodes else _FS_MAKE_CHAR | _FS_MAKE_BLOCK)
        for paths, access in ((read_only, ro), (executable, ro | _FS_EXECUTE), (read_write, rw)):
            for path in paths:
                _landlock_add_path(ruleset, path, access)
        _no_new_privs()
        if _libc.syscall(_LL_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _landlock_add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist needs no rule
    try:
        if not os.path.isdir(path):
            access &= _FS_READ_FILE | _FS_WRITE_FILE | _FS_EXECUTE | _FS_TRUNCATE | _FS_IOCTL_DEV
        attr = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
        if _libc.syscall(_LL_ADD_RULE, ruleset, _LL_RULE_PATH_BENEATH, attr, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)


# --- seccomp --------------------------------------------------------------------------------------
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_ALLOW, _RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
# x86_64 numbers. Denied with EPERM: exec, new processes, tracing, namespaces, mounts, kernel
# modules, keyrings, bpf, io_uring (it can open sockets behind seccomp's back), raising rlimits.
_X86_64_DENY = {
    59: "execve", 322: "execveat", 57: "fork", 58: "vfork", 101: "ptrace", 310: "process_vm_readv",
    311: "process_vm_writev", 165: "mount", 166: "umount2", 155: "pivot_root", 161: "chroot",
    272: "unshare", 308: "setns", 425: "io_uring_setup", 426: "io_uring_enter",
    427: "io_uring_register", 321: "bpf", 298: "perf_event_open", 250: "keyctl", 248: "add_key",
    249: "request_key", 323: "userfaultfd", 246: "kexec_load", 320: "kexec_file_load",
    175: "init_module", 313: "finit_module", 176: "delete_module", 169: "reboot", 167: "swapon",
    168: "swapoff", 160: "setrlimit", 200: "tkill", 424: "pidfd_send_signal", 129: "rt_sigqueueinfo",
    297: "rt_tgsigqueueinfo", 434: "pidfd_open", 438: "pidfd_getfd", 304: "open_by_handle_at",
    428: "open_tree", 429: "move_mount", 430: "fsopen", 431: "fsconfig", 432: "fsmount", 433: "fspick",
    442: "mount_setattr", 467: "open_tree_attr",
}  # fmt: skip
_NR_CLONE, _NR_CLONE3, _NR_SOCKET, _NR_PRLIMIT64, _NR_KILL, _NR_TGKILL = 56, 435, 41, 302, 62, 234
_NR_CAPSET = 126
# With processes allowed (the shell): exec and fork are fine, but leaving the process group (which
# the host kills as a whole) is not, nor is a clone into new namespaces.
_X86_64_PROCESSES = {59: "execve", 322: "execveat", 57: "fork", 58: "vfork"}
_X86_64_GROUP = {112: "setsid", 109: "setpgid"}
# File metadata calls Landlock does not control; denied when no read-only mount refuses them instead.
_X86_64_METADATA = {
    90: "chmod", 91: "fchmod", 268: "fchmodat", 452: "fchmodat2", 92: "chown", 93: "fchown", 94: "lchown",
    260: "fchownat", 132: "utime", 235: "utimes", 261: "futimesat", 280: "utimensat", 188: "setxattr",
    189: "lsetxattr", 190: "fsetxattr", 197: "removexattr", 198: "lremovexattr", 199: "fremovexattr",
    463: "setxattrat", 466: "removexattrat", 469: "file_setattr",
}  # fmt: skip
_NR_IOCTL = 16


def _iow(kind: str, number: int, size: int, *, read: bool = False) -> int:
    """An ioctl command number, as the kernel's ``_IOW`` (or ``_IOR``) macro makes it."""
    return ((2 if read else 1) << 30) | (size << 16) | (ord(kind) << 8) | number


# The ioctls that change an inode's flags or attributes through any file descriptor, even one
# opened read-only (chattr's flags: nodump, noatime, ...; generation numbers; project ids; verity;
# encryption): denied with the metadata calls. A read-only mount refuses them too (EROFS).
_METADATA_IOCTLS = {
    _iow("f", 2, 8): "FS_IOC_SETFLAGS",
    _iow("f", 2, 4): "FS_IOC32_SETFLAGS",
    _iow("v", 2, 8): "FS_IOC_SETVERSION",
    _iow("v", 2, 4): "FS_IOC32_SETVERSION",
    _iow("f", 4, 8): "EXT4_IOC_SETVERSION",
    _iow("f", 4, 4): "EXT4_IOC32_SETVERSION",
    _iow("X", 32, 28): "FS_IOC_FSSETXATTR",
    _iow("f", 133, 128): "FS_IOC_ENABLE_VERITY",
    _iow("f", 19, 12, read=True): "FS_IOC_SET_ENCRYPTION_POLICY",
}
_CLONE_NEW_NAMESPACES = 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00020000


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


_LD_W_ABS, _JA, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x05, 0x15, 0x45, 0x35, 0x06


def _seccomp_program(
    *, allow_network: bool, pid: int, processes: bool = False, scoped_signals: bool = False, metadata: bool = True
) -> bytes:
    deny = _RET_ERRNO | _EPERM
    denied = dict(_X86_64_DENY)
    if processes:
        for number in _X86_64_PROCESSES:
            denied.pop(number)
        denied.update(_X86_64_GROUP)
    if not metadata:
        denied.update(_X86_64_METADATA)

    def arg_low(i: int) -> bytes:
        return _stmt(_LD_W_ABS, 16 + 8 * i)

    def arg_high(i: int) -> bytes:
        return _stmt(_LD_W_ABS, 20 + 8 * i)

    nr = _stmt(_LD_W_ABS, 0)
    prog = [
        _stmt(_LD_W_ABS, 4),
        _jump(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_RET_K, _RET_KILL_PROCESS),
        nr,
        _jump(_JGE_K, 0x40000000, 0, 1),  # x32 ABI syscalls
        _stmt(_RET_K, deny),
    ]
    for number in denied:
        prog += [_jump(_JEQ_K, number, 0, 1), _stmt(_RET_K, deny)]
    # clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone.
    prog += [_jump(_JEQ_K, _NR_CLONE3, 0, 1), _stmt(_RET_K, _RET_ERRNO | _ENOSYS)]
    if processes:  # clone: threads and processes, in no new namespace
        prog += [_jump(_JEQ_K, _NR_CLONE, 0, 4), arg_low(0), _jump(_JSET_K, _CLONE_NEW_NAMESPACES, 0, 1)]
        prog += [_stmt(_RET_K, deny), _stmt(_RET_K, _RET_ALLOW)]
    else:  # clone: threads only
        prog += [_jump(_JEQ_K, _NR_CLONE, 0, 4), arg_low(0), _jump(_JSET_K, _CLONE_THREAD, 0, 1)]
        prog += [_stmt(_RET_K, _RET_ALLOW), _stmt(_RET_K, deny)]
    # prlimit64: reading is fine, setting (new_limit != NULL) is not.
    prog += [nr, _jump(_JEQ_K, _NR_PRLIMIT64, 0, 5), arg_low(2), _jump(_JEQ_K, 0, 0, 2)]
    prog += [arg_high(2), _jump(_JEQ_K, 0, 1, 0), _stmt(_RET_K, deny)]
    # kill / tgkill: only this process (or its own group, 0; with processes, its group by -pid too).
    # Where Landlock scopes signals to the sandbox (ABI 6), the kernel already keeps them inside.
    if not scoped_signals:
        group = -pid & 0xFFFFFFFF if processes else pid
        for call in (_NR_KILL, _NR_TGKILL):
            prog += [nr, _jump(_JEQ_K, call, 0, 6), arg_low(0), _jump(_JEQ_K, pid, 3, 0)]
            prog += [_jump(_JEQ_K, group, 2, 0), _jump(_JEQ_K, 0, 1, 0), _stmt(_RET_K, deny)]
            prog += [_stmt(_RET_K, _RET_ALLOW)]
    if not metadata:  # ioctl: the inode attribute setters (the command is the low word of arg 1)
        commands = list(_METADATA_IOCTLS)
        prog += [nr, _jump(_JEQ_K, _NR_IOCTL, 0, len(commands) + 3), arg_low(1)]
        prog += [_jump(_JEQ_K, cmd, len(commands) - i, 0) for i, cmd in enumerate(commands)]
        prog += [_stmt(_JA, 1), _stmt(_RET_K, deny)]
    if not allow_network:
        prog += [nr, _jump(_JEQ_K, _NR_SOCKET, 0, 1), _stmt(_RET_K, deny)]
    prog.append(_stmt(_RET_K, _RET_ALLOW))
    return b"".join(prog)


def apply_seccomp(
    *, allow_network: bool, processes: bool = False, scoped_signals: bool = False, metadata: bool = True
) -> bool:
    """Install the filter on this process (and its threads); False where it is not supported.

    ``processes`` lets the process exec programs and fork (the shell), still in its own process
    group and no new namespace. ``scoped_signals`` says Landlock already keeps signals inside the
    sandbox, so kill needs no filter of its own. ``metadata=False`` denies chmod, chown, utime and
    xattr changes, and the ioctls that set inode flags (for when no read-only mount protects the
    files outside the workspace; the workspace loses them too).
    """
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    code = _seccomp_program(
        allow_network=allow_network,
        pid=os.getpid(),
        processes=processes,
        scoped_signals=scoped_signals,
        metadata=metadata,
    )
    filters = ctypes.create_string_buffer(code, len(code))

    class _Prog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    prog = _Prog(len(code) // 8, ctypes.cast(filters, ctypes.c_void_p))
    _no_new_privs()
    seccomp_set_mode_filter, tsync, nr_seccomp = 1, 1, 317
    if _libc.syscall(nr_seccomp, seccomp_set_mode_filter, tsync, ctypes.byref(prog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")
    return True


# --- all layers -----------------------------------------------------------------------------------
def confine(
    *,
    workspace: str,
    read_only: Iterable[str],
    read_write: Iterable[str],
    executable: Iterable[str] = (),
    allow_network: bool,
    mount_namespace: bool,
    memory: int,
    cpu_seconds: int,
    open_files: int,
    file_size: int,
    processes: int | None = None,
    device_nodes: bool = True,
    landlock: bool = True,
    seccomp: bool = True,
) -> list[str]:
    """Confine this process for good, in the one order that works; returns the layers it got.

    1. rlimits (``processes=None``: no processes of its own, code mode; a number: ``RLIMIT_NPROC``,
       and exec and fork allowed, the shell);
    2. a read-only root, when ``mount_namespace`` says the process is in a private mount namespace
       (needs the capabilities dropped next; a failure is not fatal: seccomp covers it, step 5);
    3. no capabilities, so nothing (not root) can remount, undo the read-only root or bypass
       file permissions;
    4. Landlock, unless ``landlock=False`` (tests of the other layers alone): read ``read_only``,
       read and run ``executable``, read and write ``read_write``; nothing else;
    5. seccomp, unless ``seccomp=False``; without the read-only root it also denies every file
       metadata change (chmod, chown, utime, xattrs, inode flags), which Landlock does not control.

    Layer names: ``rlimits``, ``read_only_root``, ``no_capabilities``, ``landlock``, ``seccomp``;
    with seccomp and no read-only root, ``no_metadata_calls`` too.
    """
    layers: list[str] = []
    apply_rlimits(
        memory=memory, cpu_seconds=cpu_seconds, open_files=open_files, file_size=file_size, processes=processes or 0
    )
    layers.append("rlimits")
    read_only_mounts = False
    if mount_namespace:
        try:
            read_only_root(workspace)
            read_only_mounts = True
            layers.append("read_only_root")
        except OSError:
            pass  # seccomp denies metadata changes instead
    drop_capabilities()
    layers.append("no_capabilities")
    abi = 0
    if landlock:
        abi = apply_landlock(
            read_only=read_only,
            read_write=read_write,
            executable=executable,
            allow_network=allow_network,
            device_nodes=device_nodes,
        )
        if abi:
            layers.append("landlock")
    # With processes of its own, signals to them are the sandbox's business: where Landlock scopes
    # signals to the sandbox (ABI 6) the kernel keeps them inside. Without, seccomp allows only itself.
    if seccomp and apply_seccomp(
        allow_network=allow_network,
        processes=processes is not None,
        scoped_signals=processes is not None and abi >= 6,
        metadata=read_only_mounts,
    ):
        layers.append("seccomp")
        if not read_only_mounts:
            layers.append("no_metadata_calls")
    return layers
