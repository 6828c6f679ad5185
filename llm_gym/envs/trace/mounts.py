"""Namespaces and mounts for the sandbox: a private network, a read-only view of the host, a size-capped private tmp.

Standard library only (see :mod:`confine`). Called once by the fork server before it forks anything (its children
share what it set up) and once per program by the fresh-interpreter baseline:

1. :func:`enter_namespaces` - a private network namespace (only a downed loopback inside) and a private mount
   namespace: directly as root, otherwise inside a new user namespace (then this process is "root" there only,
   and its children drop those capabilities again, see :func:`confine.enter`).
2. :func:`private_filesystem` - in that mount namespace (private propagation: nothing leaks to the host):
   the standard library is made readable to sandbox uids where a private home hides it (as root), every mount is
   made read-only (``mount_setattr`` recursively; an older kernel's remount per mount point otherwise), and a
   fresh tmpfs capped at a total size is mounted where programs write. The host's ``/tmp`` is never written to,
   whatever a program does to the Python audit hook.

Each step reports what it achieved as a short word (``namespace``, ``read-only``, ``private-tmpfs``) or
``none: why``; the client refuses to run programs when a layer it requires is missing (see :mod:`sandbox`).
"""

from __future__ import annotations

import ctypes
import os
import stat

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_MOUNT_ATTR_RDONLY = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
for _name in ("unshare", "mount", "umount2"):
    getattr(_libc, _name)  # resolve now: a forked child would otherwise look each symbol up again


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]  # fmt: skip


class MountError(OSError):
    """A mount step failed."""


def _errno_text() -> str:
    return os.strerror(ctypes.get_errno())


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if _libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"mount {target}: {os.strerror(err)}")


def enter_namespaces() -> dict[str, str]:
    """Enter private network and mount namespaces; returns ``{"network": ..., "mounts": ...}`` (``namespace`` or
    ``none: why``). Irreversible; call before forking anything that should share them."""
    if os.geteuid() == 0:
        if _libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS) == 0:
            return {"network": "namespace", "mounts": "namespace"}
        why = _errno_text()
        net = "namespace" if _libc.unshare(_CLONE_NEWNET) == 0 else f"none: {why}"
        mounts = "namespace" if _libc.unshare(_CLONE_NEWNS) == 0 else f"none: {_errno_text()}"
        return {"network": net, "mounts": mounts}
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWNS) != 0:
        why = f"none: no user namespace for a non-root user ({_errno_text()})"
        return {"network": why, "mounts": why}
    # Map ourselves to the same ids inside, so files we create keep their owner.
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError:
        pass  # the namespaces still isolate; ids show as the overflow id
    return {"network": "namespace", "mounts": "namespace"}


def private_filesystem(tmp_dir: str, tmp_bytes: int, standard_library: list[str]) -> dict[str, str]:
    """Read-only host, the standard library visible, a private tmpfs of ``tmp_bytes`` on ``tmp_dir`` (which must
    exist). Call inside the mount namespace of :func:`enter_namespaces`. Returns ``interpreter``, ``readonly``
    and ``tmp`` (what each step achieved)."""
    try:
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    except MountError as exc:
        why = f"none: {exc}"
        return {"interpreter": "readable" if os.geteuid() != 0 else f"unreadable: {exc}", "readonly": why,
                "tmp": why}  # fmt: skip
    report = {"interpreter": expose_standard_library(standard_library)}
    report["readonly"] = _make_read_only()
    try:
        _mount("tmpfs", tmp_dir, "tmpfs", _MS_NOSUID | _MS_NODEV, _tmpfs_options(tmp_bytes))
        report["tmp"] = "private-tmpfs"
    except MountError as exc:
        report["tmp"] = f"none: {exc}"
    return report


def _tmpfs_options(tmp_bytes: int) -> str:
    # Inodes are capped too: a million empty files would cost kernel memory the size cap does not see.
    return f"size={max(4096, int(tmp_bytes))},nr_inodes={max(64, int(tmp_bytes) // 4096)},mode=0711"


def resize_tmp(tmp_dir: str, tmp_bytes: int) -> None:
    """Change the cap of the private tmpfs on ``tmp_dir`` (raises MountError when it holds more than that)."""
    _mount(None, tmp_dir, None, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV, _tmpfs_options(tmp_bytes))


def _make_read_only() -> str:
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return "read-only"
    why = _errno_text()
    try:  # kernels before 5.12: remount each mount point read-only, keeping the flags it has
        for target, flags in _mount_points():
            _mount(None, target, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)
    except (MountError, OSError) as exc:
        return f"none: {why}; {exc}"
    return "read-only"


_FLAG_WORDS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": 8, "noatime": 1024, "nodiratime": 2048,
               "relatime": 1 << 21}  # fmt: skip


def _mount_points() -> list[tuple[str, int]]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            target = fields[4].encode().decode("unicode_escape")
            points.append((target, sum(_FLAG_WORDS.get(w, 0) for w in fields[5].split(","))))
    return points


def _closed_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that other users cannot enter (no ``o+x``), or None."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current
    return None


def expose_standard_library(roots: list[str]) -> str:
    """Make the standard library (``roots``) readable by sandbox uids where a private parent directory hides it.

    Each closed ancestor (``/root``) is covered by an empty read-only tmpfs and the standard library is
    bind-mounted back, read-only, at its own path. Call it as root in the private mount namespace, before forking
    the sandboxed processes. Returns ``readable`` (nothing to do), ``private-mount`` or ``unreadable: why`` (then
    programs may import only the modules the server preloaded).
    """
    covers = sorted({a for a in map(_closed_ancestor, roots) if a is not None})
    if not covers or os.geteuid() != 0:
        return "readable"  # not root: the sandbox runs as this user, who can read it
    keep = {root: os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for root in roots}
    try:
        for cover in covers:
            _mount("tmpfs", cover, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k,nr_inodes=256")
        for root, fd in keep.items():
            _make_path(root)
            _mount(f"/proc/self/fd/{fd}", root, None, _MS_BIND | _MS_REC)
            _mount(None, root, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        for cover in covers:
            _mount(None, cover, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    except MountError as exc:
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
