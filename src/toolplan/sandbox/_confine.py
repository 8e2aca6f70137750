"""Kernel-level confinement the sandbox child applies to itself before running model code.

Runs inside the child process only (stdlib, no toolplan imports). Every layer is irreversible once
applied: rlimits (with setrlimit/prlimit blocked by seccomp afterwards, so even root cannot raise
them), Landlock (file-system and TCP access rules), and a seccomp-BPF filter (no exec, no new
processes, no sockets, no ptrace, no namespaces, no signals to other processes). A layer the kernel
does not offer is skipped and reported, never faked.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import struct
from collections.abc import Iterable

__all__ = ("apply_rlimits", "apply_landlock", "apply_seccomp")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_PR_SET_NO_NEW_PRIVS = 38


def _no_new_privs() -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def apply_rlimits(*, memory: int, cpu_seconds: int, open_files: int, file_size: int) -> None:
    """Set hard and soft limits; the hard CPU limit is one second above the soft one (SIGXCPU first)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    # Ignored for root (CAP_SYS_RESOURCE); seccomp forbids fork/clone anyway.
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


# --- Landlock -------------------------------------------------------------------------------------
_LL_CREATE_RULESET, _LL_ADD_RULE, _LL_RESTRICT_SELF = 444, 445, 446  # same number on every arch
_LL_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_V1 = (1 << 13) - 1  # execute .. make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    version = _libc.syscall(_LL_CREATE_RULESET, None, 0, 1)
    return max(int(version), 0)


def apply_landlock(*, read_only: Iterable[str], read_write: Iterable[str], allow_network: bool) -> int:
    """Allow reading ``read_only`` trees and everything in ``read_write``; deny all other paths.

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
        for paths, access in ((read_only, ro), (read_write, fs_all & ~_FS_EXECUTE)):
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
}  # fmt: skip
_NR_CLONE, _NR_CLONE3, _NR_SOCKET, _NR_PRLIMIT64, _NR_KILL, _NR_TGKILL = 56, 435, 41, 302, 62, 234


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06


def _seccomp_program(*, allow_network: bool, pid: int) -> bytes:
    deny = _RET_ERRNO | _EPERM

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
    for number in _X86_64_DENY:
        prog += [_jump(_JEQ_K, number, 0, 1), _stmt(_RET_K, deny)]
    # clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone.
    prog += [_jump(_JEQ_K, _NR_CLONE3, 0, 1), _stmt(_RET_K, _RET_ERRNO | _ENOSYS)]
    # clone: threads only.
    prog += [_jump(_JEQ_K, _NR_CLONE, 0, 4), arg_low(0), _jump(_JSET_K, _CLONE_THREAD, 0, 1)]
    prog += [_stmt(_RET_K, _RET_ALLOW), _stmt(_RET_K, deny)]
    # prlimit64: reading is fine, setting (new_limit != NULL) is not.
    prog += [nr, _jump(_JEQ_K, _NR_PRLIMIT64, 0, 5), arg_low(2), _jump(_JEQ_K, 0, 0, 2)]
    prog += [arg_high(2), _jump(_JEQ_K, 0, 1, 0), _stmt(_RET_K, deny)]
    # kill / tgkill: only this process (or its own group, 0).
    for call in (_NR_KILL, _NR_TGKILL):
        prog += [nr, _jump(_JEQ_K, call, 0, 5), arg_low(0), _jump(_JEQ_K, pid, 2, 0)]
        prog += [_jump(_JEQ_K, 0, 1, 0), _stmt(_RET_K, deny)]
        prog += [_stmt(_RET_K, _RET_ALLOW)]
    if not allow_network:
        prog += [nr, _jump(_JEQ_K, _NR_SOCKET, 0, 1), _stmt(_RET_K, deny)]
    prog.append(_stmt(_RET_K, _RET_ALLOW))
    return b"".join(prog)


def apply_seccomp(*, allow_network: bool) -> bool:
    """Install the filter on this process (and its threads); False where it is not supported."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    code = _seccomp_program(allow_network=allow_network, pid=os.getpid())
    filters = ctypes.create_string_buffer(code, len(code))

    class _Prog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    prog = _Prog(len(code) // 8, ctypes.cast(filters, ctypes.c_void_p))
    _no_new_privs()
    seccomp_set_mode_filter, tsync, nr_seccomp = 1, 1, 317
    if _libc.syscall(nr_seccomp, seccomp_set_mode_filter, tsync, ctypes.byref(prog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")
    return True
