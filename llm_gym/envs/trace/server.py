"""The warm fork server: one small interpreter that forks a fresh, confined child per program.

Started by :class:`llm_gym.envs.trace.sandbox.ForkServerSandbox` as ``python -s server.py`` (standard library
only, so it starts in milliseconds and forks cheaply). It enters a private network namespace once, makes itself a
subreaper, pre-imports the modules programs commonly use, then serves requests on stdin/stdout:

    request  = 4-byte big-endian length + JSON {"code", "stdin", "limits", "audit_guard"}
    response = 4-byte big-endian length + JSON {"status", "detail", "stdout", "stderr", ...}

The first response, sent unasked, is ``{"ready": true, "isolation": {...}, "pid": N, "zygote": M}``. EOF on stdin ends it.
Each child gets a fresh temp directory (deleted afterwards), its stdin from a memfd and the limits of the
request, through the same :mod:`confine` and :func:`child.execute` the fresh-interpreter baseline uses. The next
child is forked and confined ahead of time (a "spare"), while the client is busy with the previous answer.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import shutil
import struct
import sys
import tempfile
from dataclasses import dataclass

try:
    from . import child, confine, mounts, supervise, zygote
except ImportError:
    import child  # type: ignore[no-redef]
    import confine  # type: ignore[no-redef]
    import mounts  # type: ignore[no-redef]
    import supervise  # type: ignore[no-redef]
    import zygote  # type: ignore[no-redef]

# Warm imports: children find these already loaded (a fresh interpreter pays for them per program).
PRELOAD = ("collections", "functools", "itertools", "math", "random", "re", "string", "json", "heapq", "bisect",
           "operator", "dataclasses", "typing", "decimal", "fractions", "statistics", "copy", "textwrap")  # fmt: skip
DEFAULT_TMP_BYTES = 16 << 20
"""The private tmpfs's size until a request asks for another (``SandboxLimits.tmp_bytes``)."""


def _recv(fd: int) -> dict | None:
    header = _read_exact(fd, 4)
    if header is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def _read_exact(fd: int, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _send(fd: int, message: dict) -> None:
    body = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


@dataclass
class Spare:
    """A child forked ahead of its program: already confined to its fresh directory, waiting on ``control``."""

    pid: int
    workdir: str
    control: int
    out: int
    err: int


class Server:
    """Serves requests one at a time. Children come from the zygote (see :mod:`zygote`), one spare always forked
    ahead, so forking and confining happen while the client is busy elsewhere rather than while it waits."""

    def __init__(self, root: str, guard: child.Guard, *, subreaper: bool, tmp: tuple[str, int] | None) -> None:
        self.root, self.guard, self.subreaper = root, guard, subreaper
        self.tmp = tmp
        """The private tmpfs holding ``root`` and its current size cap (None where there is none)."""
        self.zygote = zygote.Zygote(guard)
        self.spare: Spare | None = None

    def restart_zygote(self) -> None:
        """Replace a zygote that died (killed from outside); whatever it left is killed and reaped."""
        self.zygote.close()
        self.zygote = zygote.Zygote(self.guard)
        supervise.reap_orphans(keep=self.zygote.pid)

    def fork_spare(self) -> Spare:
        for attempt in range(2):
            workdir = tempfile.mkdtemp(dir=self.root)
            control_r, control_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                pid = self.zygote.fork(workdir, control_r, out_w, err_w)
            except (OSError, EOFError):
                for fd in (control_w, out_r, err_r):
                    os.close(fd)
                shutil.rmtree(workdir, ignore_errors=True)
                if attempt:
                    raise
                self.restart_zygote()
                continue
            finally:
                for fd in (control_r, out_w, err_w):
                    os.close(fd)
            return Spare(pid, workdir, control_w, out_r, err_r)
        raise AssertionError("unreachable")

    def ensure_spare(self) -> None:
        if self.spare is None:
            self.spare = self.fork_spare()

    def serve(self, request: dict) -> dict:
        """Run one request in the spare child and return its report (stdout/stderr as text)."""
        code = child.compile_program(request["code"])  # here: a syntax error needs no child at all
        if isinstance(code, str):
            return {"status": "error", "detail": code.strip().splitlines()[-1], "stdout": "", "stderr": code}
        payload = {"code": code, "stdin": request.get("stdin", "").encode(), "limits": request["limits"],
                   "audit_guard": request["audit_guard"]}  # fmt: skip
        self.cap_tmp(request["limits"]["tmp_bytes"])
        self.ensure_spare()
        spare, self.spare = self.spare, None
        try:
            with contextlib.suppress(BrokenPipeError):  # a spare that died in setup says why on stderr
                _write_all(spare.control, marshal.dumps(payload))
            os.close(spare.control)
            uid = confine.UID_BASE + spare.pid if confine.is_root() else None
            report = supervise.supervise(
                spare.pid, spare.out, spare.err, request["limits"], uid=uid, subreaper=self.subreaper,
                reap=self.zygote.reap, keep=self.zygote.pid,
            )  # fmt: skip
        except EOFError:
            self.restart_zygote()
            supervise.cleanup(spare.pid, uid, subreaper=self.subreaper, keep=self.zygote.pid)
            return {"status": "crashed", "detail": "the sandbox zygote died; a new one runs the next program",
                    "stdout": "", "stderr": ""}  # fmt: skip
        finally:
            os.close(spare.out)
            os.close(spare.err)
            shutil.rmtree(spare.workdir, ignore_errors=True)
        report["stdout"] = report["stdout"].decode("utf-8", "replace")
        report["stderr"] = report["stderr"].decode("utf-8", "replace")
        return report

    def cap_tmp(self, tmp_bytes: int) -> None:
        """Size the private tmpfs for the next program: it is the only one writing there (one at a time)."""
        if self.tmp is not None and self.tmp[1] != tmp_bytes:
            mounts.resize_tmp(self.tmp[0], tmp_bytes)
            self.tmp = (self.tmp[0], tmp_bytes)

    def close(self) -> None:
        self.zygote.close()  # its children, the spare included, die with it


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main() -> None:
    # The protocol owns fds 0/1; keep Python's own stdio away from them.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    guard = child.prepare()  # std streams on fds 0/1/2 (devnull here; a child's pipes after its dup2)
    tmp = tempfile.gettempdir()  # found while it is still writable: a private tmpfs covers it below
    namespaces = mounts.enter_namespaces()  # before the zygote forks: its children share them
    if namespaces["mounts"] == "namespace":
        filesystem = mounts.private_filesystem(tmp, DEFAULT_TMP_BYTES, confine.standard_library())
    else:
        none = namespaces["mounts"]
        filesystem = {"interpreter": "readable" if not confine.is_root() else f"unreadable: {none}",
                      "readonly": none, "tmp": none}  # fmt: skip
    confine.standard_library_path()
    confine.syscall_program()  # built once here; every child installs the same filter
    subreaper = confine.become_subreaper()
    for name in PRELOAD:
        __import__(name)
    gc.freeze()  # children's collections then skip everything the server allocated (fewer pages touched)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    for name in ("child", "confine", "mounts", "supervise", "syscall_filter", "zygote"):
        sys.modules.pop(name, None)  # a program's `import child` must not find ours
    root = tempfile.mkdtemp(prefix="llm-gym-trace-")
    os.chmod(root, 0o711)  # sandbox uids may enter their own directory, not list the others
    private_tmp = (tmp, DEFAULT_TMP_BYTES) if filesystem["tmp"] == "private-tmpfs" else None
    server = Server(root, guard, subreaper=subreaper, tmp=private_tmp)
    isolation = confine.probe(namespaces, filesystem)
    hello = {
        "ready": True,
        "isolation": isolation,
        "missing": confine.missing(isolation),
        "why": {**namespaces, **filesystem},
        "pid": os.getpid(),
        "zygote": server.zygote.pid,
    }
    _send(proto_out, hello)
    try:
        while True:
            server.ensure_spare()  # forked while the client prepares its next request
            request = _recv(proto_in)
            if request is None:
                break
            try:
                response = server.serve(request)
            except Exception as exc:  # a bug of ours must not take the server down
                response = {"status": "crashed", "detail": f"sandbox server error: {exc!r}", "stdout": "", "stderr": ""}
            _send(proto_out, response)
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
