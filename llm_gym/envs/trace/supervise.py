"""Watch one sandboxed process: collect its output under a cap, enforce the wall clock, clean up, classify.

Standard library only (see :mod:`confine`); used by the fork server for its children and by the
fresh-interpreter baseline for its subprocesses, so both report the same statuses the same way.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable

try:
    from . import child as _child
    from . import confine as _confine
except ImportError:
    import child as _child  # type: ignore[no-redef]
    import confine as _confine  # type: ignore[no-redef]

STATUSES = ("ok", "error", "timeout", "memory", "output_limit", "file_limit", "process_limit", "blocked", "crashed")
"""How a program run can end; everything but ``ok`` means its output is not trustworthy ground truth."""

_BY_EXIT = {
    _child.EXIT_OK: "ok",
    _child.EXIT_ERROR: "error",
    _child.EXIT_MEMORY: "memory",
    _child.EXIT_BLOCKED: "blocked",
    _child.EXIT_PROCESSES: "process_limit",
    _child.EXIT_FILE_SIZE: "file_limit",
    _child.EXIT_SETUP: "crashed",
}
_STDERR_KEEP = 4096


def _children_of(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return found


def cleanup(pid: int, uid: int | None, *, subreaper: bool, keep: int | None = None) -> None:
    """Kill whatever the sandboxed process ``pid`` left behind.

    A program can leave its process group (setsid) or double-fork, so the process group is only the first net.
    A subreaper (the fork server: orphans are re-parented to it) then kills and reaps all its descendants but
    ``keep`` (see :func:`reap_orphans`); anyone else kills the sandbox ``uid``.
    """
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if subreaper:
        reap_orphans(keep)
    elif uid is not None:
        _confine.kill_uid(uid)


def reap_orphans(keep: int | None) -> None:
    """Kill and reap every descendant of this process except ``keep`` (the zygote) and its subtree, round after
    round until none is left (RLIMIT_NPROC keeps a fork bomb finite)."""
    me = os.getpid()
    for _ in range(1000):
        direct = [p for p in _children_of(me) if p != keep]
        stack, seen = list(direct), []
        while stack:
            p = stack.pop()
            seen.append(p)
            stack += _children_of(p)
        if not seen:
            return
        for p in seen:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        reaped = False
        for p in direct:
            with contextlib.suppress(ChildProcessError):
                reaped = bool(os.waitpid(p, os.WNOHANG)[0]) or reaped
        if not reaped:
            time.sleep(0.0005)  # SIGKILL is asynchronous: give the kernel a moment before looking again


def _wait4(pid: int) -> tuple[int, float]:
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime


def supervise(
    pid: int,
    out_fd: int,
    err_fd: int,
    limits: dict,
    *,
    uid: int | None,
    subreaper: bool,
    reap: Callable[[int], tuple[int, float]] = _wait4,
    keep: int | None = None,
) -> dict:
    """Wait for ``pid`` while reading its stdout/stderr pipes, then clean up; returns the run report.

    ``limits`` gives ``wall_seconds``, ``cpu_seconds`` and ``output_bytes`` (stdout and stderr together). The
    report has ``status`` (one of :data:`STATUSES`), ``detail``, ``stdout``/``stderr`` (bytes; stderr keeps its
    first 4 KiB), ``exit_code``/``signal``, ``wall_seconds`` and ``cpu_seconds``. ``reap(pid)`` returns the wait
    status and CPU seconds once the process ended (``os.wait4`` for our own children; the fork server asks the
    zygote that forked it). ``keep`` is passed on to :func:`cleanup`.
    """
    start = time.monotonic()
    deadline = start + limits["wall_seconds"]
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone (and reaped by its parent)
        pidfd = os.eventfd(1)
    out, err = bytearray(), bytearray()
    streams = {out_fd: out, err_fd: err}
    room = [limits["output_bytes"]]  # bytes of output still allowed, both streams together
    poller = select.poll()
    for fd in (out_fd, err_fd, pidfd):
        poller.register(fd, select.POLLIN)
    verdict: tuple[str, str] | None = None
    exited = False
    while not exited and not verdict:
        left = deadline - time.monotonic()
        if left <= 0:
            verdict = ("timeout", f"wall-clock limit of {limits['wall_seconds']} s")
            break
        for fd, _ in poller.poll(left * 1000):
            if fd == pidfd:
                exited = True
            elif not _read(fd, streams, out_fd, room, poller):
                verdict = ("output_limit", f"more than {limits['output_bytes']} bytes of output")
                break
    if verdict:
        _kill(pid)
    status_word, cpu_seconds = reap(pid)
    # Kill leftovers before draining: a surviving descendant would hold the pipes open forever.
    cleanup(pid, uid, subreaper=subreaper, keep=keep)
    for fd in list(streams):
        os.set_blocking(fd, False)
        while fd in streams and not verdict:
            if not _read(fd, streams, out_fd, room, None):
                verdict = ("output_limit", f"more than {limits['output_bytes']} bytes of output")
    os.close(pidfd)
    report = {
        "stdout": bytes(out),
        "stderr": bytes(err),
        "wall_seconds": time.monotonic() - start,
        "cpu_seconds": cpu_seconds,
        "exit_code": os.WEXITSTATUS(status_word) if os.WIFEXITED(status_word) else None,
        "signal": os.WTERMSIG(status_word) if os.WIFSIGNALED(status_word) else None,
    }
    report["status"], report["detail"] = verdict or classify(report, limits)
    return report


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _read(fd: int, streams: dict[int, bytearray], out_fd: int, room: list[int], poller: select.poll | None) -> bool:
    """Read one chunk from ``fd`` into its buffer; False once the output cap is exceeded."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        chunk = None
    if not chunk:
        if chunk is not None and poller is not None:
            poller.unregister(fd)
        streams.pop(fd)
        return True
    room[0] -= len(chunk)
    buf = streams[fd]
    buf += chunk if fd == out_fd else chunk[: max(0, _STDERR_KEEP - len(buf))]
    return room[0] >= 0


def classify(report: dict, limits: dict) -> tuple[str, str]:
    """Status and a one-line detail from how the process ended."""
    sig, exit_code = report["signal"], report["exit_code"]
    if sig is not None:
        # SIGXCPU at the soft CPU limit; SIGKILL at the hard one if the program ignored SIGXCPU.
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and report["cpu_seconds"] >= limits["cpu_seconds"]):
            return "timeout", f"cpu-time limit of {limits['cpu_seconds']} s"
        if sig == signal.SIGXFSZ:
            return "file_limit", f"file-size limit of {limits['file_bytes']} bytes"
        if sig == signal.SIGSYS:  # the seccomp filter (syscall_filter): sockets, namespaces, mounts, tracing
            return "blocked", "a system call the sandbox forbids (a socket, a namespace, a mount or ptrace)"
        return "crashed", f"killed by {signal.Signals(sig).name}"
    status = _BY_EXIT.get(exit_code, "error")
    if status == "ok":
        return "ok", ""
    if status == "memory":
        return status, f"memory limit of {limits['memory_bytes']} bytes"
    if status == "process_limit":
        return status, f"process limit of {limits['max_processes']}"
    last = report["stderr"].decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {exit_code}"]
    return status, last[0][:300]
