"""Kernel-level confinement of one sandboxed process: Landlock, a dedicated uid, seccomp, rlimits.

Standard library only: this module also runs as a plain script sibling (the fork server and the fresh-interpreter
runner import it without importing :mod:`llm_gym`, which would cost half a second per interpreter).

Layers, each used when the kernel and our privileges allow it (:func:`probe` says which are active; the
namespaces and mounts that come before are in :mod:`mounts`):

* **sockets** - a seccomp filter (:mod:`syscall_filter`): ``socket``/``socketpair`` of any family, io_uring,
  namespaces, mounts and ptrace kill the process (status ``blocked``). It is what keeps a program away from a unix
  socket file on the host, which neither the network namespace nor Landlock cover.
* **filesystem** - Landlock: reading is allowed only beneath an allow-list (:func:`read_allow_list`: the working
  directory, the standard library, the shared-library directories extension modules load from, a few device
  files); every write-type access (write, create, remove, rename, truncate, mkfifo, symlink) and ``execve`` is
  denied outside the working directory. Landlock ABI >= 4 also denies TCP bind/connect, ABI >= 6 denies signals to
  processes outside the sandbox (its parent included) and abstract unix sockets. The read-only mount namespace of
  :mod:`mounts` refuses writes outside the private tmp on its own; without Landlock the audit guard in
  :mod:`child` checks the read allow-list for Python-level opens.
* **uid** - as root, every sandboxed process runs under a uid of its own (``UID_BASE + pid``) with no
  capabilities at all: it owns nothing outside its directory, reads only what any user may read (so not a
  root-only ``0600`` file, even where Landlock is missing), cannot signal the server, and ``RLIMIT_NPROC`` counts
  only its own processes. As another user, the process keeps that user's uid and drops the capabilities its
  user namespace gave it.
* **rlimits** - CPU seconds, address space, file size, open files, processes, no core files.

:data:`REQUIRED` names what must hold without the audit hook; :func:`missing` says what does not, here.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

try:  # inside the package
    from . import syscall_filter as _syscall_filter
except ImportError:  # run as a script sibling
    import syscall_filter as _syscall_filter  # type: ignore[no-redef]

UID_BASE = 0x10000000
"""Sandbox uids are ``UID_BASE + pid``: unmapped ids that own no file outside the sandbox directory."""

_PR_SET_PDEATHSIG = 1
_CAP_VERSION_3 = 0x20080522
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SYS_LANDLOCK = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # same numbers on every arch

# Landlock filesystem rights (linux/landlock.h); the ABI version that introduced each is in the comment.
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE, _FS_READ_DIR = 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect; ABI 4
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals; ABI 6

LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
"""Where the shared libraries of extension modules (``zlib``, ``_hashlib``, ...) are loaded from."""
READABLE_FILES = ("/etc/ld.so.cache", "/dev/zero", "/dev/urandom", "/dev/random")
"""Single files a sandboxed program may read (the dynamic loader's cache, device files); ``/dev/null`` also takes
writes."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
for _name in ("prctl", "capset", "capget"):
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


def standard_library() -> list[str]:
    """The directories of the running interpreter's standard library (sources and extension modules), as real
    paths, none inside another."""
    found = {os.path.dirname(os.__file__)} | {p for p in sys.path if os.path.basename(p) == "lib-dynload"}
    real = sorted({os.path.realpath(p) for p in found if os.path.isdir(p)})
    return [p for p in real if not any(p.startswith(q + os.sep) for q in real)]


def read_allow_list() -> tuple[list[str], list[str]]:
    """What a sandboxed program may read besides its working directory: ``(directories, files)`` (real paths)."""
    directories = standard_library()
    for path in LIBRARY_DIRS:
        real = os.path.realpath(path)
        if os.path.isdir(real) and not any(real == d or real.startswith(d + os.sep) for d in directories):
            directories.append(real)
    files = [os.path.realpath(p) for p in (*READABLE_FILES, os.devnull) if os.path.exists(p)]
    return directories, files


def standard_library_path() -> None:
    """Keep only standard-library entries on ``sys.path``: nothing else is readable in the sandbox, so importing
    anything else must fail as "not found" at once, not on a refused directory listing."""
    roots = standard_library()
    sys.path[:] = [p for p in sys.path if _beneath(os.path.realpath(p or "."), roots)]


def _beneath(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def become_subreaper() -> bool:
    """Orphans of sandboxed processes are re-parented to us, so they can be found and killed."""
    return _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def probe(namespaces: dict[str, str], filesystem: dict[str, str]) -> dict[str, str]:
    """Which layers apply in this process's children (``namespaces`` is what :func:`mounts.enter_namespaces`
    returned, ``filesystem`` what :func:`mounts.private_filesystem` did)."""
    abi = landlock_abi()
    network = namespaces.get("network", "none")
    return {
        "network": network if network == "namespace" else "audit-hook",
        "sockets": "seccomp" if syscall_program() else "audit-hook",
        "filesystem": f"landlock-abi-{abi}" if abi else "audit-hook",
        "readonly": "mount-namespace" if filesystem.get("readonly") == "read-only" else "none",
        "tmp": filesystem.get("tmp", "none") if filesystem.get("tmp") == "private-tmpfs" else "host",
        "reads": "landlock-allow-list+audit-hook" if abi else "audit-hook" + ("+uid" if is_root() else ""),
        "uid": "dedicated-no-capabilities" if is_root() else "shared-no-capabilities",
        "interpreter": filesystem.get("interpreter", "readable"),
        "signals": "landlock-scope+uid" if abi >= 6 and is_root() else ("landlock-scope" if abi >= 6 else "audit-hook"),
        "processes": "rlimit" if is_root() or network == "namespace" else "none",
    }


REQUIRED = {
    "no sockets of any family": lambda iso: iso["sockets"] == "seccomp",
    "a private size-capped tmp": lambda iso: iso["tmp"] == "private-tmpfs",
    "read-only outside the working directory": lambda iso: (
        iso["readonly"] != "none" or iso["filesystem"].startswith("landlock")
    ),
}
"""What the sandbox guarantees without the Python audit hook; the client refuses to run programs without all."""


def missing(isolation: dict[str, str]) -> list[str]:
    """The guarantees of :data:`REQUIRED` that ``isolation`` (from :func:`probe`) does not give."""
    return [name for name, holds in REQUIRED.items() if not holds(isolation)]


_program: list[bytes | None] = []


def syscall_program() -> bytes | None:
    """The seccomp filter for this machine, None where it has none (built once, before the server forks)."""
    if not _program:
        _program.append(None if _syscall_filter.unavailable_reason() else _syscall_filter.build())
    return _program[0]


def _landlock(workdir: str, abi: int, readable: tuple[list[str], list[str]]) -> None:
    handled = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_READ_DIR | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    handled |= (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, _NET_TCP if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(_SYS_LANDLOCK["create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    truncate = _FS_TRUNCATE if abi >= 3 else 0
    directories, files = readable
    rules = [(workdir, handled & ~_FS_EXECUTE)]  # everything but execve beneath the working directory
    rules += [(d, _FS_READ_FILE | _FS_READ_DIR) for d in directories]
    rules += [(f, _FS_READ_FILE | (_FS_WRITE_FILE | truncate if f == os.devnull else 0)) for f in files]
    try:
        for path, rights in rules:
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


def enter(workdir: str, *, readable: tuple[list[str], list[str]] | None = None) -> int | None:
    """Confine the calling process to ``workdir`` (everything but the rlimits); irreversible.

    Returns the sandbox uid (None when not root). The namespaces are entered before, once, by the caller
    (:func:`mounts.enter_namespaces`). ``readable`` is :func:`read_allow_list`, computed ahead by a caller that
    confines many processes. The seccomp filter comes last: it also forbids what this function itself calls.
    """
    os.setsid()  # own session and process group: one killpg() reaches everything that did not setsid() again
    die_with_parent()
    uid = UID_BASE + os.getpid() if is_root() else None
    if uid is not None:
        os.chown(workdir, uid, uid)
    os.chdir(workdir)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    abi = landlock_abi()
    if abi:
        _landlock(workdir, abi, readable or read_allow_list())
    if uid is not None:
        _become(uid)
    else:
        _drop_capabilities()  # those a user namespace gave (mount, net admin there): the program keeps none
    program = syscall_program()
    if program:
        _syscall_filter.install(program)
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
    """Switch to ``uid`` with no capabilities left (the kernel clears them when every uid leaves 0; checked)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check_no_capabilities("setresuid")


def _drop_capabilities() -> None:
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")
    _check_no_capabilities("capset")


def _check_no_capabilities(after: str) -> None:
    data = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capget")
    if any(d.effective or d.permitted for d in data):
        raise ConfinementError(0, f"capabilities left after {after}: {[(d.effective, d.permitted) for d in data]}")


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
