"""Kernel-level confinement of one sandboxed process: namespaces, rlimits, Landlock, a dedicated uid.

Standard library only: this module also runs as a plain script sibling (the fork server and the fresh-interpreter
runner import it without importing :mod:`llm_gym`, which would cost half a second per interpreter).

Layers, each used when the kernel and our privileges allow it (:func:`probe` says which are active):

* **network** - a private network namespace (only a downed loopback inside), entered with ``unshare``; as root
  directly, otherwise through a user namespace. Where neither is permitted the Python audit guard in
  :mod:`child` blocks socket creation instead.
* **filesystem** - Landlock: reading is allowed only beneath an allow-list (:func:`read_allow_list`: the working
  directory, the standard library, the shared-library directories extension modules load from, a few device
  files); every write-type access (write, create, remove, rename, truncate, mkfifo, symlink) and ``execve`` is
  denied outside the working directory. Landlock ABI >= 4 also denies TCP bind/connect, ABI >= 6 denies signals to
  processes outside the sandbox (its parent included) and abstract unix sockets. Without Landlock the audit
  guard in :mod:`child` checks the same read allow-list and write rule for Python-level opens.
* **uid** - as root, every sandboxed process runs under a uid of its own (``UID_BASE + pid``) with no
  capabilities at all: it owns nothing outside its directory, reads only what any user may read (so not a
  root-only ``0600`` file, even where Landlock is missing), cannot signal the server, and ``RLIMIT_NPROC`` counts
  only its own processes.
* **interpreter** - an interpreter installed under a private directory (``/root/.pyenv``, mode 0700 on
  ``/root``) is unreadable by such a uid. :func:`expose_standard_library` then gives the sandbox a mount namespace
  of its own in which that private directory is covered by an empty tmpfs and only the standard library is
  bind-mounted back, read-only, at its usual path: the sandbox can import it and sees nothing else there.
* **rlimits** - CPU seconds, address space, file size, open files, processes, no core files.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import stat
import sys

UID_BASE = 0x10000000
"""Sandbox uids are ``UID_BASE + pid``: unmapped ids that own no file outside the sandbox directory."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_CAP_VERSION_3 = 0x20080522
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_SYS_LANDLOCK = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # same numbers on every arch

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18

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
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
for _name in ("prctl", "unshare", "capset", "capget", "mount", "umount2"):
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


def _closed_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that other users cannot enter (no ``o+x``), or None."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current
    return None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), f"mount {target}")


def expose_standard_library() -> str:
    """Make the standard library readable by sandbox uids where a private parent directory hides it.

    In a mount namespace of this process's own (private propagation: nothing changes outside it), each closed
    ancestor (``/root``) is covered by an empty read-only tmpfs and the standard library is bind-mounted back,
    read-only, at its own path. Call it as root before forking the sandboxed processes. Returns what applies:
    ``readable`` (nothing to do), ``private-mount`` or ``unreadable: why`` (then programs may import only the
    modules the server preloaded).
    """
    roots = standard_library()
    covers = sorted({a for a in map(_closed_ancestor, roots) if a is not None})
    if not covers:
        return "readable"
    if not is_root():
        return "readable"  # the sandbox runs as this user, who can read it
    if _libc.unshare(_CLONE_NEWNS) != 0:
        return f"unreadable: no mount namespace ({os.strerror(ctypes.get_errno())})"
    keep = {root: os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for root in roots}
    try:
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        for cover in covers:
            _mount("tmpfs", cover, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k,nr_inodes=256")
        for root, fd in keep.items():
            _make_path(root)
            _mount(f"/proc/self/fd/{fd}", root, None, _MS_BIND | _MS_REC)
            _mount(None, root, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        for cover in covers:
            _mount(None, cover, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    except ConfinementError as exc:
        return f"unreadable: {exc}"
    finally:
        for fd in keep.values():
            os.close(fd)
    return "private-mount"


def _make_path(path: str) -> None:
    """``mkdir -p`` with every new directory mode 0755 whatever the umask (the sandbox uid must enter them)."""
    current = "/"
    for part in path.strip("/").split("/"):
        current = os.path.join(current, part)
        if not os.path.isdir(current):
            os.mkdir(current)
            os.chmod(current, 0o755)


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


def probe(network: str, interpreter: str = "readable") -> dict[str, str]:
    """Which layers apply in this process (``network`` is what :func:`enter_network_namespace` returned,
    ``interpreter`` what :func:`expose_standard_library` did)."""
    abi = landlock_abi()
    return {
        "network": network if network == "namespace" else "audit-hook",
        "filesystem": f"landlock-abi-{abi}" if abi else "audit-hook",
        "reads": "landlock-allow-list+audit-hook" if abi else "audit-hook" + ("+uid" if is_root() else ""),
        "uid": "dedicated-no-capabilities" if is_root() else "shared",
        "interpreter": interpreter,
        "signals": "landlock-scope+uid" if abi >= 6 and is_root() else ("landlock-scope" if abi >= 6 else "audit-hook"),
        "processes": "rlimit" if is_root() or network == "namespace" else "none",
    }


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


def enter(workdir: str, *, new_network: bool, readable: tuple[list[str], list[str]] | None = None) -> int | None:
    """Confine the calling process to ``workdir`` (everything but the rlimits); irreversible.

    Returns the sandbox uid (None when not root). ``new_network`` enters a private network namespace here (the
    fork server does it once for all its children). ``readable`` is :func:`read_allow_list`, computed ahead by a
    caller that confines many processes.
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
        _landlock(workdir, abi, readable or read_allow_list())
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
    """Switch to ``uid`` with no capabilities left (the kernel clears them when every uid leaves 0; checked)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    data = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capget")
    if any(d.effective or d.permitted for d in data):
        raise ConfinementError(0, f"capabilities left after setresuid: {[(d.effective, d.permitted) for d in data]}")


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
