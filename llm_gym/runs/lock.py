"""One writer per run directory: an advisory lock on ``RUN/.lock``, held while a process trains into the run.

Two ``train --resume RUN`` at once used to both succeed and interleave their checkpoints; and a reader's
:meth:`~llm_gym.runs.Run.open` cleaned up "leftovers" that were in fact the checkpoint a running training was
writing. ``flock`` is released by the kernel when the holder exits, however it exits (a SIGKILL included), so a
killed run never leaves a stale lock behind, and a resume after a crash just works. The file holds the holder's
pid and start time, for the message a second writer gets.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from llm_gym.errors import CheckpointError

LOCK_FILE = ".lock"


class RunLock:
    """The held lock of one run directory; :meth:`release` (or the process's exit) gives it up."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def try_acquire(cls, run_dir: Path) -> RunLock | None:
        """The lock of ``run_dir``, or None while another process holds it (or the directory is read-only)."""
        try:
            fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        with contextlib.suppress(OSError):  # who holds it, for the message another writer gets
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        return cls(fd, run_dir)

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """The lock of ``run_dir``; raises :class:`CheckpointError` naming the holder while another process has it."""
        lock = cls.try_acquire(run_dir)
        if lock is not None:
            return lock
        if not os.access(run_dir, os.W_OK):
            raise CheckpointError(f"{run_dir} is not writable; pass a run directory this user can write")
        raise CheckpointError(
            f"{run_dir} is in use by another llm-gym process ({holder(run_dir)}); wait for it to end, or stop it, "
            "before training into this run"
        )

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the flock


def holder(run_dir: Path) -> str:
    """``pid N since TIME`` of the process that holds (or last held) the lock of ``run_dir``."""
    try:
        pid, _, since = (run_dir / LOCK_FILE).read_text().strip().partition(" ")
    except OSError:
        return "pid unknown"
    return f"pid {pid} since {since}" if pid.isdigit() else "pid unknown"
