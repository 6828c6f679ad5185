"""A seccomp filter for sandboxed programs: no sockets of any family, no namespaces, mounts, tracing or io_uring.

Standard library only (see :mod:`confine`). The network namespace keeps a program off the host's network, but not
off a unix socket file on the host's disk (a world-writable one is reachable by any uid, and Landlock does not
govern ``connect`` on a socket file). The filter closes that at the system-call level, whatever the program does
to the Python audit hook: ``socket``/``socketpair`` are refused for every address family, and so is everything
that could undo the other layers (new namespaces, mounts, ptrace, ``bpf``, io_uring, which can open sockets by
itself). A refused call kills the process with ``SIGSYS``; the supervisor reports that as status ``blocked``.

``clone3`` (whose flags sit in memory a filter cannot read) answers ``ENOSYS``, so the C library falls back to
``clone``, whose namespace flags the filter checks. Calls of another ABI (x32, i386 through ``int 0x80``) are
refused outright, since their numbers differ.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_GET_ACTION_AVAIL = 2

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_X32_BIT = 0x40000000

# The calls refused, with their numbers on x86_64 and aarch64 (asm/unistd_64.h, asm-generic/unistd.h).
_DENIED_TABLE = """
socket 41 198             socketpair 53 199         io_uring_setup 425 425    io_uring_enter 426 426
io_uring_register 427 427 unshare 272 97            setns 308 268             mount 165 40
umount2 166 39            pivot_root 155 41         chroot 161 51             ptrace 101 117
process_vm_readv 310 270  process_vm_writev 311 271 bpf 321 280               keyctl 250 219
add_key 248 217           request_key 249 218       perf_event_open 298 241   userfaultfd 323 282
open_tree 428 428         move_mount 429 429        fsopen 430 430            fsconfig 431 431
fsmount 432 432           fspick 433 433            mount_setattr 442 442
"""
_ENTRIES = _DENIED_TABLE.split()
DENIED_CALLS = tuple(_ENTRIES[0::3])
"""The system calls a sandboxed program may not make (any of them kills it)."""
_ARCHES = {
    "x86_64": {"audit_arch": 0xC000003E, "numbers": tuple(map(int, _ENTRIES[1::3])), "clone": 56, "clone3": 435,
               "seccomp": 317, "x32": True},
    "aarch64": {"audit_arch": 0xC00000B7, "numbers": tuple(map(int, _ENTRIES[2::3])), "clone": 220, "clone3": 435,
                "seccomp": 277, "x32": False},
}  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl  # resolve now: a forked child would otherwise look the symbol up again  # noqa: B018


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _arch() -> dict | None:
    return _ARCHES.get(platform.machine())


def unavailable_reason() -> str | None:
    """Why the filter cannot be installed on this machine, or None when it can."""
    arch = _arch()
    if arch is None:
        return f"no seccomp filter for the {platform.machine() or 'unknown'} architecture"
    action = ctypes.c_uint32(_RET_KILL_PROCESS)
    if _libc.syscall(arch["seccomp"], _SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action)) != 0:
        return f"the kernel has no seccomp filters ({errno.errorcode.get(ctypes.get_errno(), '?')})"
    return None


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build() -> bytes:
    """The filter program for this architecture (raises RuntimeError where there is none)."""
    arch = _arch()
    if arch is None:
        raise RuntimeError(unavailable_reason())
    denied = arch["numbers"]
    program = [
        _instruction(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _instruction(_JEQ_K, 1, 0, arch["audit_arch"]),
        _instruction(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _instruction(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch["x32"]:
        program += [_instruction(_JGE_K, 0, 1, _X32_BIT), _instruction(_RET_K, 0, 0, _RET_KILL_PROCESS)]
    # Each denied number jumps to the final KILL: past the tests after it and the six instructions of the tail.
    for i, number in enumerate(denied):
        program.append(_instruction(_JEQ_K, len(denied) - i - 1 + 6, 0, number))
    program += [
        _instruction(_JEQ_K, 0, 1, arch["clone3"]),
        _instruction(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
        _instruction(_JEQ_K, 0, 2, arch["clone"]),
        _instruction(_LD_W_ABS, 0, 0, 16),  # low word of args[0]: clone's flags (little-endian arches only)
        _instruction(_JSET_K, 1, 0, _NAMESPACE_FLAGS),
        _instruction(_RET_K, 0, 0, _RET_ALLOW),
        _instruction(_RET_K, 0, 0, _RET_KILL_PROCESS),
    ]
    return b"".join(program)


def install(program: bytes) -> None:
    """Install ``program`` (from :func:`build`) on the calling thread and its future children; irreversible.

    Needs ``no_new_privs`` (set by :func:`confine.enter`) or CAP_SYS_ADMIN. Raises OSError when refused.
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {errno.errorcode.get(err, err)}")
