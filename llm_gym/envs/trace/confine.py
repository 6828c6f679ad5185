"""Kernel-level confinement of one sandboxed process: namespaces, rlimits, Landlock, a dedicated uid.

Standard library only: this module also runs as a plain script sibling (the fork server and the fresh-interpreter
runner import it without importing :mod:`llm_gym`, which would cost half a second per interpreter).

Layers, each used when the kernel and our privileges allow it (:func:`probe` says which are active):

* **network** - a private network namespace (only a downed loopback inside), entered with ``unshare``; as root
  directly, otherwise through a user namespace. Where neither is permitted the Python audit guard in
  :mod:`child` blocks socket creation instead.
* **filesystem** - Landlock: every write-type access (write, create, remove, rename, truncate, mkfifo, symlink)
  and ``execve`` is denied outside the fresh working directory; reads stay allowed. Landlock ABI >= 4 also denies
  TCP bind/connect, ABI >= 6 denies signals to processes outside the sandbox (its parent included) and abstract
  unix sockets.
* **uid** - as root, every sandboxed process runs under a uid of its own (``UID_BASE + pid``): it owns nothing
  outside its directory, cannot signal the server, and makes ``RLIMIT_NPROC`` count only its own processes. It
  keeps one capability, ``CAP_DAC_READ_SEARCH`` (read any file), so an interpreter installed under a private
  home directory (``/root/.pyenv``) can still import its standard library.
* **rlimits** - CPU seconds, address space, file size, open files, processes, no core files.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal

UID_BASE = 0x10000000
"""Sandbox uids are ``UID_BASE + pid``: unmapped ids that own no file outside the sandbox directory."""

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_KEEPCAPS = 8
_CAP_DAC_READ_SEARCH = 2
_CAP_VERSION_3 = 0x20080522
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SYS_LANDLOCK = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # same numbers on every arch

# Landlock filesystem rights (linux/landlock.h); the ABI version that introduced each is in the comment.
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect; ABI 4
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals; ABI 6

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
for _name in ("prctl", "unshare", "capset"):
    getattr(_libc, _name)  # resolve now: a forked child would otherwise look each symbol up again


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class ConfinementError(OSError):
    """A layer that :func:`probe` reported available could not be applied."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"{what}: {os.strerror(err)}")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled (asked once per process tree)."""
    global _abi
    if _abi is None:
        version = _libc.syscall(_SYS_LANDLOCK["create_ruleset"], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        _abi = max(int(version), 0)
    return _abi


_abi: int | None = None


def is_root() -> bool:
    return os.geteuid() == 0


def enter_network_namespace() -> str:
    """Leave the host network: a new network namespace, via a user namespace when not root.

    Returns ``"namespace"`` on success, ``"none"`` when the kernel or our privileges do not allow it.
    """
    if _libc.unshare(_CLONE_NEWNET) == 0:
        return "namespace"
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return "none"
    # Map ourselves to the same ids inside, so files we create keep their owner.
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    except OSError:
        pass  # the namespace still isolates the network; ids show as the overflow id
    return "namespace"


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def become_subreaper() -> bool:
    """Orphans of sandboxed processes are re-parented to us, so they can be found and killed."""
    return _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def probe(network: str) -> dict[str, str]:
    """Which layers apply in this process (``network`` is what :func:`enter_network_namespace` returned)."""
    abi = landlock_abi()
    return {
        "network": network if network == "namespace" else "audit-hook",
        "filesystem": f"landlock-abi-{abi}" if abi else "audit-hook",
        "uid": "dedicated" if is_root() else "shared",
        "signals": "landlock-scope+uid" if abi >= 6 and is_root() else ("landlock-scope" if abi >= 6 else "audit-hook"),
        "processes": "rlimit" if is_root() or network == "namespace" else "none",
    }


def _landlock(workdir: str, abi: int) -> None:
    handled = _FS_EXECUTE | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    handled |= (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, _NET_TCP if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(_SYS_LANDLOCK["create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    file_rights = _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    try:
        # Everything except execve beneath the working directory; plain writes to /dev/null.
        for path, rights in ((workdir, handled & ~_FS_EXECUTE), ("/dev/null", file_rights)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(rights, fd)
                _check(
                    _libc.syscall(_SYS_LANDLOCK["add_rule"], ruleset, 1, ctypes.byref(rule), 0),
                    f"landlock_add_rule {path}",
                )
            finally:
                os.close(fd)
        _check(_libc.syscall(_SYS_LANDLOCK["restrict_self"], ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def enter(workdir: str, *, new_network: bool) -> int | None:
    """Confine the calling process to ``workdir`` (everything but the rlimits); irreversible.

    Returns the sandbox uid (None when not root). ``new_network`` enters a private network namespace here (the
    fork server does it once for all its children).
    """
    os.setsid()  # own session and process group: one killpg() reaches everything that did not setsid() again
    die_with_parent()
    if new_network:
        enter_network_namespace()
    uid = UID_BASE + os.getpid() if is_root() else None
    if uid is not None:
        os.chown(workdir, uid, uid)
    os.chdir(workdir)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    abi = landlock_abi()
    if abi:
        _landlock(workdir, abi)
    if uid is not None:
        _become(uid)
    return uid


def limit(limits: dict) -> None:
    """Apply the resource limits: ``cpu_seconds``, ``memory_bytes``, ``file_bytes``, ``max_processes``,
    ``max_open_files`` (only ever lowered, so this works after :func:`enter` dropped privileges)."""
    cpu = max(1, int(limits["cpu_seconds"] + 0.999))
    for name, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),  # SIGXCPU at the soft limit, SIGKILL one second later
        (resource.RLIMIT_AS, (limits["memory_bytes"],) * 2),
        (resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2),
        (resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2),
        (resource.RLIMIT_NPROC, (limits["max_processes"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(name, value)


def _become(uid: int) -> None:
    """Switch to ``uid`` keeping only CAP_DAC_READ_SEARCH (no write, kill or resource override)."""
    _check(_libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0), "prctl(KEEPCAPS)")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    keep = 1 << _CAP_DAC_READ_SEARCH
    data = (_CapData * 2)(_CapData(keep, keep, 0), _CapData(0, 0, 0))
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")
    _check(_libc.prctl(_PR_SET_KEEPCAPS, 0, 0, 0, 0), "prctl(KEEPCAPS)")


def kill_uid(uid: int) -> None:
    """SIGKILL every process running as ``uid`` (a sandbox uid), whatever session or process group it moved to."""
    pid = os.fork()
    if pid == 0:  # a throwaway child takes the uid, so kill(-1) reaches exactly that uid's processes
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
