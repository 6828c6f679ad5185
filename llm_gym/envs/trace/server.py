"""The warm fork server: one small interpreter that forks a fresh, confined child per program.

Started by :class:`llm_gym.envs.trace.sandbox.ForkServerSandbox` as ``python -s server.py`` (standard library
only, so it starts in milliseconds and forks cheaply). It enters a private network namespace once, makes itself a
subreaper, pre-imports the modules programs commonly use, then serves requests on stdin/stdout:

    request  = 4-byte big-endian length + JSON {"code", "stdin", "limits", "audit_guard"}
    response = 4-byte big-endian length + JSON {"status", "detail", "stdout", "stderr", ...}

The first response, sent unasked, is ``{"ready": true, "isolation": {...}, "pid": N}``. EOF on stdin ends it.
Each child gets a fresh temp directory (deleted afterwards), its stdin from a memfd and the limits of the
request, through the same :func:`child.run` the fresh-interpreter baseline uses.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import struct
import sys
import tempfile

try:
    from . import child, confine, supervise
except ImportError:
    import child  # type: ignore[no-redef]
    import confine  # type: ignore[no-redef]
    import supervise  # type: ignore[no-redef]

# Warm imports: children find these already loaded (a fresh interpreter pays for them per program).
PRELOAD = ("collections", "functools", "itertools", "math", "random", "re", "string", "json", "heapq", "bisect",
           "operator", "dataclasses", "typing", "decimal", "fractions", "statistics", "copy", "textwrap")  # fmt: skip


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


def serve_one(request: dict, root: str, guard: child.Guard, *, in_namespace: bool, subreaper: bool) -> dict:
    """Run one request in a fresh forked child and return its report (stdout/stderr as text)."""
    limits = request["limits"]
    # Everything that does not need the child happens here, once, instead of after the fork where each touched
    # page is a copy-on-write fault.
    code = child.compile_program(request["code"])
    if isinstance(code, str):
        return {"status": "error", "detail": code.strip().splitlines()[-1], "stdout": "", "stderr": code}
    workdir = tempfile.mkdtemp(dir=root)
    child.set_workdir_env(workdir)
    stdin_fd = os.memfd_create("stdin")
    os.write(stdin_fd, request.get("stdin", "").encode())
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(stdin_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 65536)  # the protocol pipes and everything else of ours
        except BaseException:
            os._exit(child.EXIT_SETUP)
        child.run(code, workdir, limits, guard if request["audit_guard"] else None, new_network=not in_namespace)
    for fd in (stdin_fd, out_w, err_w):
        os.close(fd)
    try:
        uid = confine.UID_BASE + pid if confine.is_root() else None
        report = supervise.supervise(pid, out_r, err_r, limits, uid=uid, subreaper=subreaper)
    finally:
        os.close(out_r)
        os.close(err_r)
        shutil.rmtree(workdir, ignore_errors=True)
    report["stdout"] = report["stdout"].decode("utf-8", "replace")
    report["stderr"] = report["stderr"].decode("utf-8", "replace")
    return report


def main() -> None:
    # The protocol owns fds 0/1; keep Python's own stdio away from them.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    guard = child.prepare()  # std streams on fds 0/1/2 (devnull here; a child's pipes after its dup2)
    network = confine.enter_network_namespace()
    subreaper = confine.become_subreaper()
    for name in PRELOAD:
        __import__(name)
    gc.freeze()  # children's collections then skip everything the server allocated (fewer pages touched)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    for name in ("child", "confine", "supervise"):
        sys.modules.pop(name, None)  # a program's `import child` must not find ours
    root = tempfile.mkdtemp(prefix="llm-gym-trace-")
    os.chmod(root, 0o711)  # sandbox uids may enter their own directory, not list the others
    _send(proto_out, {"ready": True, "isolation": confine.probe(network), "pid": os.getpid()})
    try:
        while (request := _recv(proto_in)) is not None:
            try:
                response = serve_one(request, root, guard, in_namespace=network == "namespace", subreaper=subreaper)
            except Exception as exc:  # a bug of ours must not take the server down
                response = {"status": "crashed", "detail": f"sandbox server error: {exc!r}", "stdout": "", "stderr": ""}
            _send(proto_out, response)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
