"""Writing files so that a full disk or an unwritable path is one line naming the path, and loses nothing.

Every file llm-gym writes for the user (run files, checkpoints, the bench store's exports, the leaderboard, demos,
plots, play-only copies) goes through here:

* :func:`replacing` / :func:`write_text_atomic` / :func:`write_json_atomic` / :func:`write_via` - the new content
  goes into a temporary file beside the target, is fsynced and renamed over it: a reader sees the old file or the
  new one, and a failed write leaves the old one (or none) and no temporary file;
* :func:`writing` - for what a library writes itself (torch, SQLite, a folder of files): the failure it raises
  becomes the same one line.

The line is a :class:`WriteError` (an ``LLMGymError``: one line, exit code 2 on the command line) naming the path
and the reason (``No space left on device``, ``Read-only file system``, ``Permission denied``, ``No such file or
directory``), and with a full disk, how much room is left there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from llm_gym.errors import LLMGymError

# torch's zip writer reports a short write as a RuntimeError ("unexpected pos", "file write failed").
_LIBRARY_WRITE_FAILURE = re.compile(r"inline_container|PytorchStreamWriter|file write failed|unexpected pos")


class WriteError(LLMGymError, OSError):
    """A file or folder could not be written (disk full, read-only, no permission); what was there is kept."""


def write_failure(exc: BaseException) -> str | None:
    """Why ``exc`` (or what caused it) is a failure to write, as ``strerror`` text; None when it is not one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, shutil.Error) and current.args and isinstance(current.args[0], list):
            why = str(current.args[0][0][-1]) if current.args[0] else str(current)  # copytree's (src, dst, why)
            found = re.search(r"\[Errno \d+\] ([^:']+)", why)
            return found.group(1).strip() if found else why
        if isinstance(current, OSError) and not isinstance(current, WriteError):
            return (current.strerror or os.strerror(current.errno)) if current.errno else str(current)
        if re.search(r"disk is full|disk I/O error|unable to open database file", str(current)):  # sqlite3
            return str(current)
        if isinstance(current, RuntimeError) and _LIBRARY_WRITE_FAILURE.search(str(current)):
            return "the file could not be written completely (is the disk full?)"
        current = current.__cause__ or current.__context__
    return None


def error_for(path: str | os.PathLike, exc: BaseException, keeps: str = "") -> WriteError:
    """The one-line :class:`WriteError` for a failure to write ``path``."""
    reason = write_failure(exc) or str(exc)
    if re.search(r"space|disk|quota|completely", reason, re.IGNORECASE):
        room = _free_space(Path(path))
        if room is not None:
            reason += f" ({room / (1 << 20):.1f} MiB free there)"
    return WriteError(f"cannot write {os.fspath(path)}: {reason}" + (f"; {keeps}" if keeps else ""))


def _free_space(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        with contextlib.suppress(OSError):
            if candidate.exists():
                return shutil.disk_usage(candidate).free
    return None


@contextlib.contextmanager
def writing(path: str | os.PathLike, keeps: str = "") -> Iterator[None]:
    """Turn a failure to write ``path`` inside the block into a :class:`WriteError` naming it (``keeps`` says what
    is left as it was, e.g. "the previous checkpoints are kept"); other errors pass through."""
    try:
        yield
    except WriteError:
        raise
    except Exception as exc:
        if write_failure(exc) is None:
            raise
        raise error_for(path, exc, keeps) from exc


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


@contextlib.contextmanager
def replacing(path: str | os.PathLike, mode: str = "w", **open_args: Any) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on leaving the block it is fsynced and renamed over
    ``path``. On any failure the temporary file is removed, ``path`` is left as it was, and a failure to write is a
    :class:`WriteError` naming ``path``."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with writing(path, "the previous file, if any, is kept"):
            with open(tmp, mode, **open_args) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_via(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Let ``write(tmp)`` (a library call that takes a path: ``savefig``, ``torch.save``) write a temporary file
    beside ``path``, then rename it over ``path``; failures as in :func:`replacing`."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        with writing(path, "the previous file, if any, is kept"):
            write(tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with replacing(path) as handle:
        handle.write(text)
    return Path(path)


def write_json_atomic(path: str | os.PathLike, data: Any, *, indent: int | None = 2) -> Path:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    with replacing(path) as handle:
        json.dump(data, handle, indent=indent, default=str)
    return Path(path)
