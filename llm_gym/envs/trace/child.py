"""What runs inside a sandboxed process: confine, guard, execute the program, and say how it ended.

Standard library only (see :mod:`confine`). Two callers share this code path, so both sandboxes isolate alike:

* the fork server calls :func:`run` in each freshly forked child;
* the fresh-interpreter baseline runs this file as a script: ``python -s child.py FD`` where ``FD`` carries the
  JSON request (``code``, ``stdin`` already on fd 0, ``workdir``, ``limits``, ``audit_guard``).

The program runs as ``__main__`` with stdout/stderr on fds 1/2 (UTF-8), ``random`` seeded with 0 and
``PYTHONHASHSEED=0`` (set by the launcher), so its output depends on nothing but its code and stdin.

The exit code tells the supervisor what happened; program exits with other codes map to ``EXIT_ERROR``.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import errno
import io
import json
import marshal
import os
import random
import sys
import traceback
from types import CodeType
from typing import NoReturn

try:  # inside the package
    from . import confine as _confine
    from . import mounts as _mounts
except ImportError:  # run as a script, next to confine.py
    import confine as _confine  # type: ignore[no-redef]
    import mounts as _mounts  # type: ignore[no-redef]

EXIT_OK, EXIT_ERROR = 0, 1
EXIT_MEMORY, EXIT_BLOCKED, EXIT_PROCESSES, EXIT_FILE_SIZE, EXIT_SETUP = 101, 102, 103, 104, 105
WEAK_SANDBOX_VARIABLE = "LLM_GYM_TRACE_WEAK_SANDBOX"
"""Set to 1 to run programs where a kernel layer of :data:`confine.REQUIRED` is missing (the audit hook alone
then stands for it); without it the sandbox refuses."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {  # audit event -> indexes of the path arguments that must stay inside the working directory
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "os.truncate": (0,), "os.rename": (0, 1), "os.link": (1,), "os.symlink": (1,), "shutil.copyfile": (1,),
    "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.copytree": (1,), "shutil.rmtree": (0,),
    "shutil.move": (0, 1), "shutil.chown": (0,),
}  # fmt: skip
_PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn", "os.forkpty")


class Guard:
    """The Python-level second layer: an audit hook (irremovable once added) that denies network, subprocesses,
    signals to other processes, native code loading (ctypes), writes outside the working directory, and reads
    (opening, listing) outside the working directory and the read allow-list (:func:`confine.read_allow_list`).

    Built ahead (in the fork server, before forking) and armed in the child, so a child pays only for arming.
    """

    def __init__(self) -> None:
        self.root = ""
        self.violations: list[str] = []
        self._me = os.getpid
        self.readable = _confine.read_allow_list()
        """``(directories, files)`` a program may read besides its working directory (Landlock gets the same)."""

    def arm(self, workdir: str) -> None:
        self.root = os.path.realpath(workdir)
        sys.addaudithook(self)

    @staticmethod
    def _resolve(path: object) -> str | None:
        try:
            return os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None

    def inside(self, path: object) -> bool:
        if isinstance(path, int):  # an already open fd: its opening was checked
            return True
        resolved = self._resolve(path)
        return resolved is not None and (resolved == self.root or resolved.startswith(self.root + os.sep))

    def may_read(self, path: object) -> bool:
        if path is None or isinstance(path, int) or self.inside(path):
            return True
        resolved = self._resolve(path)
        directories, files = self.readable
        return resolved is not None and (
            resolved in files or any(resolved == d or resolved.startswith(d + os.sep) for d in directories)
        )

    def deny(self, what: str) -> None:
        self.violations.append(what)
        raise PermissionError(errno.EPERM, f"sandbox: {what} is not allowed")

    def __call__(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags or 0) & _WRITE_FLAGS
            if writing and path is not None and not self.inside(path):
                self.deny(f"writing {path!r} outside the working directory")
            if not writing and not self.may_read(path):
                self.deny(f"reading {path!r} (outside the working directory and the standard library)")
        elif event in ("os.listdir", "os.scandir"):
            if args and not self.may_read(args[0]):
                self.deny(f"listing {args[0]!r} (outside the working directory and the standard library)")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not self.inside(args[i]):
                    self.deny(f"{event} on {args[i]!r} outside the working directory")
        elif event.startswith("socket."):
            self.deny("network access")
        elif event.startswith(_PROCESS_EVENTS):
            self.deny(f"starting programs ({event})")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if not (event == "os.kill" and args[0] == self._me()):
                self.deny(f"signalling other processes ({event})")
        elif event.startswith("ctypes."):  # the server's own ctypes handles stay reachable through gc
            self.deny("native code (ctypes)")


def prepare() -> Guard:
    """Work every run needs that does not depend on the program, done once per interpreter (before forking).

    The std streams wrap fds 0/1/2, which each child points at its own stdin memfd and output pipes.
    """
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    return Guard()


def set_workdir_env(workdir: str) -> None:
    os.environ.update(HOME=workdir, TMPDIR=workdir, PWD=workdir)
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = workdir


def _classify(exc: BaseException) -> int:
    if isinstance(exc, MemoryError):
        return EXIT_MEMORY
    if isinstance(exc, BlockingIOError) and exc.errno == errno.EAGAIN:
        return EXIT_PROCESSES  # fork() refused: RLIMIT_NPROC
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT):
        return EXIT_FILE_SIZE  # RLIMIT_FSIZE (Python ignores SIGXFSZ, so the write fails) or the tmpfs is full
    return EXIT_ERROR


def execute(code: CodeType, workdir: str, guard: Guard | None) -> int:
    """Run ``code`` as ``__main__`` in this (already confined) process; returns the exit code to use."""
    random.seed(0)
    if guard is not None:
        guard.arm(workdir)
    status = EXIT_OK
    try:
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
    except MemoryError:
        return EXIT_MEMORY  # leave at once: reporting needs memory that is not there
    except SystemExit as exc:
        status = EXIT_OK if exc.code in (None, 0) else EXIT_ERROR
        if status != EXIT_OK:  # as the interpreter would, plus the code, which our exit status cannot carry
            print(exc.code if not isinstance(exc.code, int) else f"SystemExit: {exc.code}", file=sys.stderr)
    except BaseException as exc:
        status = _classify(exc)
        try:
            # From the program's frames on: ours is not the program's business, and reading its source for the
            # traceback would be a read outside the allow-list.
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        except MemoryError:
            return EXIT_MEMORY
    try:
        atexit._run_exitfuncs()
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()  # type: ignore[attr-defined]  # join threads, as at interpreter exit
        sys.stdout.flush()
    except BaseException as exc:
        status = max(status, _classify(exc))
    if guard is not None and guard.violations:
        print(f"[sandbox] blocked: {guard.violations[0]}", file=sys.stderr)
        status = EXIT_BLOCKED
    with contextlib.suppress(BaseException):
        sys.stderr.flush()
    return status


def run(code: CodeType, workdir: str, limits: dict, guard: Guard | None) -> NoReturn:
    """Confine this process and run ``code`` (compiled, file name ``<program>``); never returns."""
    try:
        _confine.enter(workdir)
        _confine.limit(limits)
    except BaseException as exc:
        _setup_failed(exc)
    os._exit(execute(code, workdir, guard))


def serve_spare(control_fd: int, workdir: str, guard: Guard) -> NoReturn:
    """A fork server's spare child: confine now, then wait for the program on ``control_fd``; never returns.

    The request (from the server: trusted) is a marshalled dict: ``code`` (a code object), ``stdin`` (bytes),
    ``limits`` and ``audit_guard``. It arrives whole, then the server closes its end.
    """
    try:
        _confine.enter(workdir, readable=guard.readable)
    except BaseException as exc:
        _setup_failed(exc)
    chunks = []
    while chunk := os.read(control_fd, 1 << 16):
        chunks.append(chunk)
    os.close(control_fd)
    if not chunks:  # the server went away or discarded this spare
        os._exit(EXIT_SETUP)
    request = marshal.loads(b"".join(chunks))
    try:
        stdin = os.memfd_create("stdin")
        os.write(stdin, request["stdin"])
        os.lseek(stdin, 0, os.SEEK_SET)
        os.dup2(stdin, 0)
        os.close(stdin)
        _confine.limit(request["limits"])
    except BaseException as exc:
        _setup_failed(exc)
    os._exit(execute(request["code"], workdir, guard if request["audit_guard"] else None))


def _setup_failed(exc: BaseException) -> NoReturn:
    os.write(2, f"[sandbox] setup failed: {exc!r}\n".encode())
    os._exit(EXIT_SETUP)


def compile_program(code: str) -> CodeType | str:
    """The program compiled, or the text of its SyntaxError (reported as status ``error`` without running)."""
    try:
        return compile(code, "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return "".join(traceback.format_exception_only(type(exc), exc))


def _close_fds_above(keep: int) -> None:
    os.closerange(keep + 1, 65536)


def main() -> None:
    """Script entry of the fresh-interpreter baseline: read the request from the fd in argv[1] and run it."""
    fd = int(sys.argv[1])
    with os.fdopen(fd, "rb") as f:
        request = json.loads(f.read())
    _close_fds_above(2)
    # Programs must not import our sibling modules by accident.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    namespaces = _mounts.enter_namespaces()  # as root still, or in a user namespace of this process's own
    filesystem = {"readonly": namespaces["mounts"], "tmp": namespaces["mounts"]}
    if namespaces["mounts"] == "namespace":
        tmp_bytes = request["limits"]["tmp_bytes"]
        filesystem = _mounts.private_filesystem(request["workdir"], tmp_bytes, _confine.standard_library())
    _confine.standard_library_path()
    missing = _confine.missing(_confine.probe(namespaces, filesystem))
    if missing and os.environ.get(WEAK_SANDBOX_VARIABLE) != "1":
        os.write(2, f"[sandbox] refused: no kernel layer gives {', '.join(missing)} here ({filesystem})\n".encode())
        os._exit(EXIT_SETUP)
    if filesystem.get("interpreter", "").startswith("unreadable"):
        os.write(2, f"[sandbox] the standard library is {filesystem['interpreter']}\n".encode())
    for name in ("confine", "mounts", "syscall_filter"):
        sys.modules.pop(name, None)
    guard = prepare()
    code = compile_program(request["code"])
    if isinstance(code, str):
        os.write(2, code.encode())
        os._exit(EXIT_ERROR)
    set_workdir_env(request["workdir"])
    run(code, request["workdir"], request["limits"], guard if request["audit_guard"] else None)


if __name__ == "__main__":
    main()
