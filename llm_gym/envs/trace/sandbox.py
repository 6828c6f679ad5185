"""Run untrusted Python programs in a real sandbox: the warm fork server, and a fresh-interpreter baseline.

Both run each program in a separate process confined the same way (:mod:`confine`, :mod:`child`): CPU-time,
address-space, file-size, open-file and process-count limits, a wall-clock timeout, an output cap, a fresh temp
working directory, no network and no writes outside that directory. They differ only in how the process starts:

* :class:`ForkServerSandbox` keeps one small warm interpreter (``server.py``, whose idle twin ``zygote.py`` does
  the forking) that forks a child per program;
* :class:`FreshInterpreterSandbox` starts ``python`` anew per program (the reference the benchmark compares to).

Linux only (namespaces, Landlock, pidfd).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path

from llm_gym.envs.trace import confine, supervise
from llm_gym.envs.trace.child import WEAK_SANDBOX_VARIABLE
from llm_gym.envs.trace.supervise import STATUSES
from llm_gym.errors import LLMGymError

__all__ = [
    "STATUSES",
    "ForkServerSandbox",
    "FreshInterpreterSandbox",
    "SandboxLimits",
    "SandboxResult",
    "shared_sandbox",
]

_HERE = Path(__file__).resolve().parent
_MiB = 1 << 20


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """What one program may use. Exceeding a limit ends the run with the status named below."""

    wall_seconds: float = 5.0
    """Wall-clock time before the program is killed (status ``timeout``)."""
    cpu_seconds: float = 2.0
    """CPU time (RLIMIT_CPU, rounded up to whole seconds) before SIGXCPU (status ``timeout``)."""
    memory_bytes: int = 256 * _MiB
    """Address space (RLIMIT_AS); allocations beyond it raise MemoryError (status ``memory``)."""
    file_bytes: int = 1 * _MiB
    """Largest file the program may write (RLIMIT_FSIZE; status ``file_limit``)."""
    tmp_bytes: int = 16 * _MiB
    """All files in its private temp directory together (a tmpfs of that size; status ``file_limit``)."""
    output_bytes: int = 64 * 1024
    """stdout and stderr together; more and the program is killed (status ``output_limit``)."""
    max_processes: int = 16
    """Processes and threads of the sandbox uid (RLIMIT_NPROC); a refused fork is status ``process_limit``."""
    max_open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    audit_guard: bool = True
    """Also install the Python audit hook (status ``blocked``); off only to test the kernel layers alone."""

    def request(self) -> dict:
        limits = asdict(self)
        limits.pop("audit_guard")
        return limits


@dataclass(frozen=True)
class SandboxResult:
    """How one program run ended."""

    status: str
    """One of :data:`STATUSES`; anything but ``ok`` means the output is not a trustworthy ground truth."""
    stdout: str = ""
    """What the program printed (up to the output cap)."""
    stderr: str = ""
    """The first 4 KiB of its stderr (tracebacks, sandbox messages)."""
    detail: str = ""
    """One line on why the status is not ``ok`` (the exception, the limit hit)."""
    exit_code: int | None = None
    signal: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_report(cls, report: dict) -> SandboxResult:
        known = {k: report[k] for k in cls.__dataclass_fields__ if k in report}
        for key in ("stdout", "stderr"):
            if isinstance(known.get(key), bytes):
                known[key] = known[key].decode("utf-8", "replace")
        return cls(**known)


def _child_env() -> dict[str, str]:
    # PYTHONHASHSEED=0: str hashes, hence set order, must not differ between runs of the same program.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }
    if _weak_sandbox_allowed():
        env[WEAK_SANDBOX_VARIABLE] = "1"
    return env


def _weak_sandbox_allowed() -> bool:
    return os.environ.get(WEAK_SANDBOX_VARIABLE) == "1"


def refusal(missing: list[str], why: dict[str, str]) -> LLMGymError:
    """The error for a machine where the kernel layers of :data:`confine.REQUIRED` cannot all be had."""
    reasons = "; ".join(f"{k}: {v}" for k, v in why.items() if str(v).startswith(("none", "unreadable")))
    return LLMGymError(
        f"the Trace sandbox cannot guarantee {', '.join(missing)} on this machine ({reasons or 'no seccomp'}), so "
        "it runs no program; run as root or where unprivileged user namespaces and seccomp are allowed, or set "
        f"{WEAK_SANDBOX_VARIABLE}=1 to accept the Python audit hook alone (docs/reference/reliability.md)"
    )


class ForkServerSandbox:
    """A warm fork server: a few ms per program instead of an interpreter start; restarts itself if it dies.

    Thread-safe (one program at a time per server); after ``os.fork`` the child process starts its own server.
    """

    def __init__(self, python: str | None = None, start_timeout: float = 30.0) -> None:
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._owner = 0
        self.isolation: dict[str, str] = {}
        """Which confinement layers are active (see :func:`confine.probe`); filled when the server starts."""
        self.missing: list[str] = []
        """Guarantees of :data:`confine.REQUIRED` this machine cannot give (only ever non-empty when
        ``LLM_GYM_TRACE_WEAK_SANDBOX=1`` accepted that; otherwise the first run refuses)."""
        self.server_pid: int | None = None
        self.zygote_pid: int | None = None
        self.restarts = 0
        self._box: list[subprocess.Popen | None] = [None]  # shared with the finalizer, which must not hold self
        weakref.finalize(self, ForkServerSandbox._stop, self._box)

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code`` with ``stdin`` in a fresh confined child and report how it went."""
        limits = limits or SandboxLimits()
        request = {"code": code, "stdin": stdin, "limits": limits.request(), "audit_guard": limits.audit_guard}
        with self._lock:
            proc = self._ensure_started()
            try:
                _send(proc.stdin, request)
                report = _recv(proc.stdout, timeout=limits.wall_seconds + 30.0)
            except (OSError, EOFError, TimeoutError) as exc:
                self._stop(self._box)
                self._proc = None
                self.restarts += 1
                return SandboxResult(
                    "crashed", detail=f"sandbox server died ({exc}); a new one starts for the next run"
                )
        return SandboxResult.from_report(report)

    def close(self) -> None:
        with self._lock:
            self._stop(self._box)
            self._proc = None

    def _ensure_started(self) -> subprocess.Popen:
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            return self._proc
        if self._proc is not None and self._owner == os.getpid():
            self._stop(self._box)
        proc = subprocess.Popen(
            [self.python, "-s", str(_HERE / "server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_child_env(),
            start_new_session=True,  # a Ctrl-C meant for us must not kill it mid-run
        )
        try:
            hello = _recv(proc.stdout, timeout=self.start_timeout)
        except (OSError, EOFError, TimeoutError) as exc:
            proc.kill()
            proc.wait()
            raise LLMGymError(
                f"the Trace sandbox server did not start ({exc}); it needs Linux >= 5.3 (pidfd) and Python >= 3.11"
            ) from exc
        if hello["missing"] and not _weak_sandbox_allowed():
            self._stop([proc])
            raise refusal(hello["missing"], hello["why"])
        self._proc, self._owner = proc, os.getpid()
        self._box[0] = proc
        self.isolation, self.server_pid, self.zygote_pid = hello["isolation"], hello["pid"], hello["zygote"]
        self.missing = hello["missing"]
        return proc

    @staticmethod
    def _stop(box: list) -> None:
        proc = box[0]
        box[0] = None
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.stdin.close()  # EOF: the server cleans its temp root and exits
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


def _send(pipe, message: dict) -> None:
    body = json.dumps(message).encode()
    pipe.write(struct.pack(">I", len(body)) + body)
    pipe.flush()


def _recv(pipe, timeout: float) -> dict:
    fd = pipe.fileno()
    deadline = time.monotonic() + timeout

    def read_exact(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no answer from the sandbox server")
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError("the sandbox server exited")
            data += chunk
        return bytes(data)

    return json.loads(read_exact(struct.unpack(">I", read_exact(4))[0]))


class FreshInterpreterSandbox:
    """One new ``python -s child.py`` per program, confined exactly like a fork-server child (plus a network
    namespace of its own). The slow reference :mod:`benchmarks.trace_throughput` compares the fork server to."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._root = tempfile.mkdtemp(prefix="llm-gym-trace-fresh-")
        os.chmod(self._root, 0o711)
        weakref.finalize(self, shutil.rmtree, self._root, True)

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxResult:
        limits = limits or SandboxLimits()
        workdir = tempfile.mkdtemp(dir=self._root)
        request = {"code": code, "workdir": workdir, "limits": limits.request(), "audit_guard": limits.audit_guard}
        stdin_fd, request_fd = os.memfd_create("stdin"), os.memfd_create("request")
        try:
            for fd, data in ((stdin_fd, stdin.encode()), (request_fd, json.dumps(request).encode())):
                os.write(fd, data)
                os.lseek(fd, 0, os.SEEK_SET)
            proc = subprocess.Popen(
                [self.python, "-s", str(_HERE / "child.py"), str(request_fd)],
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(request_fd,),
                env=_child_env(),
            )
        finally:
            os.close(stdin_fd)
            os.close(request_fd)
        try:
            uid = confine.UID_BASE + proc.pid if confine.is_root() else None
            report = supervise.supervise(
                proc.pid, proc.stdout.fileno(), proc.stderr.fileno(), limits.request(), uid=uid, subreaper=False
            )
            proc.returncode = report["exit_code"] if report["exit_code"] is not None else -(report["signal"] or 0)
        finally:
            proc.stdout.close()
            proc.stderr.close()
            shutil.rmtree(workdir, ignore_errors=True)
        return SandboxResult.from_report(report)

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


_shared: dict[int, ForkServerSandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox() -> ForkServerSandbox:
    """The process-wide fork server every Trace env uses (one per process; started on first use)."""
    with _shared_lock:
        box = _shared.get(os.getpid())
        if box is None:
            box = _shared[os.getpid()] = ForkServerSandbox()
        return box
