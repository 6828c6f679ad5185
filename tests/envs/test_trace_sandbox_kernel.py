"""What the Trace sandbox guarantees without its audit hook: no sockets, a capped private tmp, a read-only host.

A program can switch the Python audit hook off from inside (it is an object the program can reach through its
frames); these tests do exactly that, or turn the hook off, and check that the kernel layers still hold, as root
(a dedicated uid) and as an ordinary user (a user namespace), and that a machine without those layers is refused
in one line rather than used unsandboxed.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from llm_gym.envs.trace.env import TraceEnv
from llm_gym.envs.trace.sandbox import ForkServerSandbox, FreshInterpreterSandbox, SandboxLimits
from llm_gym.errors import LLMGymError

FAST = SandboxLimits(wall_seconds=5.0, cpu_seconds=1.0)
KERNEL_ONLY = SandboxLimits(wall_seconds=5.0, cpu_seconds=1.0, audit_guard=False)
HOOK_OFF = "import sys\nsys._getframe(1).f_locals['guard'].deny = lambda what: None\n"
"""What a hostile program does first: the audit hook still runs, but denies nothing any more."""


@pytest.fixture(scope="module")
def box() -> ForkServerSandbox:
    sandbox = ForkServerSandbox()
    yield sandbox
    sandbox.close()


class HostSocket:
    """A world-writable unix socket file on the host that records whatever reaches it."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="llm-gym-host-socket-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "host.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        os.chmod(self.path, 0o777)
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    self.received.append(conn.recv(100))
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> list[bytes]:
        self._stop.set()
        self._thread.join()
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.received


def _connect_program(path: str) -> str:
    return (
        f"{HOOK_OFF}import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        f"s.connect({path!r})\ns.sendall(b'escaped')\nprint('sent')"
    )


@pytest.mark.parametrize("kind", ["fork_server", "fresh_interpreter"])
def test_a_program_that_disarms_the_audit_hook_reaches_no_host_unix_socket(box: ForkServerSandbox, kind: str) -> None:
    host = HostSocket()
    runner = box if kind == "fork_server" else FreshInterpreterSandbox()
    try:
        result = runner.run(_connect_program(host.path), limits=FAST)
    finally:
        received = host.close()
    assert received == [], "the program reached the host's socket"
    assert result.status == "blocked" and "sent" not in result.stdout, result
    assert "system call" in result.detail


def test_a_trace_dataset_row_that_disarms_the_hook_is_not_a_valid_task(box: ForkServerSandbox, tmp_path: Path) -> None:
    host = HostSocket()
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text(json.dumps({"program": _connect_program(host.path)}) + "\n")
    env = TraceEnv(dataset=dataset, on_invalid="mark", inject_dataset=False, sandbox=box, cache_dir=tmp_path / "c")
    try:
        _, info = env.reset(seed=0, options={"task_id": 0})
        _, reward, *_, step_info = env.step("sent\n")
    finally:
        received = host.close()
    assert received == [] and info["status"] == "blocked" and not info["valid"]
    assert reward == 0.0 and not step_info["exact"]


SOCKETS = {
    "unix": "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)",
    "inet": "socket.socket(socket.AF_INET, socket.SOCK_STREAM)",
    "inet6": "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)",
    "netlink": "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
    "packet": "socket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
    "socketpair": "socket.socketpair()",
}


FILL = (
    "import os\nwritten = 0\nfor i, where in enumerate(('.', '/tmp', '/dev/shm', '/var/tmp', '/')):\n"
    "    for n in range(200):\n        try:\n"
    "            with open(os.path.join(where, f'llm-gym-fill-{i}-{n}'), 'wb') as f:\n"
    "                f.write(b'x' * (1 << 20))\n            written += 1\n"
    "        except OSError as e:\n            print(where, type(e).__name__, e.errno)\n            break\n"
    "print('MiB', written)"
)


def test_the_private_tmp_has_a_total_cap_and_the_host_stays_untouched(box: ForkServerSandbox) -> None:
    host_tmp = Path(tempfile.gettempdir())
    before = set(os.listdir(host_tmp))
    result = box.run(HOOK_OFF + FILL, limits=SandboxLimits(wall_seconds=10.0, cpu_seconds=5.0, tmp_bytes=4 << 20))
    written = int(result.stdout.rsplit("MiB ", 1)[1])
    assert written <= 4, result.stdout  # 1 MiB per file, 4 MiB in all: the fifth file does not fit
    assert ". OSError 28" in result.stdout, result.stdout  # ENOSPC in the working directory
    assert not [n for n in set(os.listdir(host_tmp)) - before if n.startswith("llm-gym-fill")]
    assert not list(Path("/dev/shm").glob("llm-gym-fill-*")) and not list(Path("/var/tmp").glob("llm-gym-fill-*"))
    # the cap is per program: the next one has the default room again
    again = box.run("open('f', 'wb').write(b'x' * (1 << 20))\nprint('ok')", limits=FAST)
    assert again.ok and again.stdout == "ok\n"


def test_the_mount_namespace_alone_makes_the_host_read_only(tmp_path: Path) -> None:
    """The mount layer by itself (no Landlock, no uid switch): writes outside the capped tmpfs fail with EROFS."""
    from llm_gym.envs.trace import mounts

    target = tmp_path / "outside.txt"
    work = tmp_path / "work"
    work.mkdir()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read)
        report = mounts.enter_namespaces()
        report |= mounts.private_filesystem(str(work), 1 << 20, [])
        outcome = []
        for path in (target, work / "inside.txt"):
            try:
                path.write_text("x")
                outcome.append("written")
            except OSError as exc:
                outcome.append(os.strerror(exc.errno))
        os.write(write, json.dumps([report, outcome]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        report, outcome = json.loads(f.read())
    os.waitpid(pid, 0)
    assert report["readonly"] == "read-only" and report["tmp"] == "private-tmpfs", report
    assert outcome == ["Read-only file system", "written"]
    assert not target.exists() and not (work / "inside.txt").exists(), "the tmpfs was private to the child"


# -- as an ordinary user, and where the kernel layers are missing ----------------------------------------------------

_NOBODY = 65534


def _interpreter_for_nobody() -> str:
    """A Python >= 3.11 that uid 65534 can run and whose server file it can read (else the test is skipped)."""
    server = Path(__file__).resolve().parents[2] / "llm_gym" / "envs" / "trace" / "server.py"
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to start a process as another user")
    check = (
        f"import os, sys; assert sys.version_info >= (3, 11); open({str(server)!r}).close(); "
        "os.execv(sys.executable, [sys.executable, '-c', 'pass'])"  # the sandbox's fresh interpreters re-exec it
    )
    for python in ("/usr/bin/python3", sys.executable):
        probe = subprocess.run(
            ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups", python, "-c", check],
            capture_output=True,
        )
        if probe.returncode == 0:
            return python
    pytest.skip("no Python >= 3.11 that an ordinary user can run and read the sandbox with")


def _launcher(directory: Path, python: str, before: str = "") -> str:
    """An executable that starts ``python ARGS`` as uid 65534; with ``before`` (a Python file), ``python before
    python ARGS`` (it sets something up, then execs the rest)."""
    script = directory / "python-as-nobody"
    command = f'{python} {before} {python} "$@"' if before else f'{python} "$@"'
    script.write_text(f"#!/bin/sh\nexec setpriv --reuid={_NOBODY} --regid={_NOBODY} --clear-groups {command}\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def shared_dir() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="llm-gym-nobody-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_an_ordinary_user_gets_the_same_guarantees(shared_dir: Path) -> None:
    runner = ForkServerSandbox(python=_launcher(shared_dir, _interpreter_for_nobody()))
    host = HostSocket()
    try:
        assert runner.run("import os\nprint(os.getuid())", limits=FAST).stdout == f"{_NOBODY}\n"
        assert runner.missing == [] and runner.isolation["uid"] == "shared-no-capabilities", runner.isolation
        result = runner.run(_connect_program(host.path), limits=FAST)
        filled = runner.run(HOOK_OFF + FILL, limits=SandboxLimits(wall_seconds=10, cpu_seconds=5, tmp_bytes=3 << 20))
        caps = runner.run("print(open('/proc/self/status').read())", limits=KERNEL_ONLY)
    finally:
        received = host.close()
        runner.close()
    assert received == [] and result.status == "blocked", result
    assert int(filled.stdout.rsplit("MiB ", 1)[1]) <= 3, filled.stdout
    assert "CapEff:\t0000000000000000" in caps.stdout or caps.status == "error", caps  # Landlock may hide /proc


# A seccomp filter that answers EPERM to unshare(), as container runtimes' default profiles do: no namespaces.
_DENY_UNSHARE = """
import ctypes, os, platform, struct, sys
nr = {"x86_64": 272, "aarch64": 97}[platform.machine()]
code = [(0x20, 0, 0, 0), (0x15, 0, 1, nr), (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]
prog = b"".join(struct.pack("=HBBI", *i) for i in code)
buf = ctypes.create_string_buffer(prog, len(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Fprog(len(code), ctypes.cast(buf, ctypes.c_void_p))), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_machine_without_the_kernel_layers_is_refused_in_one_line(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the test's filter knows x86_64 and aarch64")
    python = _interpreter_for_nobody()
    (shared_dir / "deny_unshare.py").write_text(_DENY_UNSHARE)
    launcher = _launcher(shared_dir, python, str(shared_dir / "deny_unshare.py"))
    runner = ForkServerSandbox(python=launcher)
    with pytest.raises(LLMGymError) as refused:
        runner.run("print(1)", limits=FAST)
    message = str(refused.value)
    assert "\n" not in message and "a private size-capped tmp" in message and "LLM_GYM_TRACE_WEAK_SANDBOX=1" in message
    monkeypatch.setenv("LLM_GYM_TRACE_WEAK_SANDBOX", "1")  # the documented opt-in runs what the kernel allows
    accepted = ForkServerSandbox(python=launcher)
    try:
        assert accepted.run("print(1)", limits=FAST).stdout == "1\n"
        assert "a private size-capped tmp" in accepted.missing and accepted.isolation["sockets"] == "seccomp"
        host = HostSocket()
        result = accepted.run(_connect_program(host.path), limits=FAST)
        assert host.close() == [] and result.status == "blocked"  # seccomp still holds where namespaces do not
    finally:
        accepted.close()


UNDO = {
    "a user namespace": "libc.unshare(0x10000000)",
    "a mount": "libc.mount(b'none', b'.', b'tmpfs', 0, None)",
    "io_uring": "libc.syscall(425, 8, ctypes.create_string_buffer(120))",
    "ptrace": "libc.ptrace(16, os.getppid(), 0, 0)",
    "clone into a new network namespace": "libc.syscall(56 if platform.machine() == 'x86_64' else 220, 0x40000000 | 17, 0, 0, 0, 0)",
}

# With the audit hook off, each program prints its marker only if the call went through: the kernel filter must stop
# it first. A socket of any family, and every call that could undo the sandbox.
KERNEL_STOPS = {
    **{
        f"a {family} socket": (
            f"import socket\ntry:\n    {call}\nexcept OSError as e:\n    print('refused', e)\nprint('alive')",
            "alive",
        )
        for family, call in SOCKETS.items()
    },
    **{
        what: (f"import ctypes, os, platform\nlibc = ctypes.CDLL(None)\nprint('returned', {call})", "returned")
        for what, call in UNDO.items()
    },
}


@pytest.mark.parametrize("what", KERNEL_STOPS)
def test_the_kernel_filter_stops_sockets_and_calls_that_could_undo_the_sandbox(
    box: ForkServerSandbox, what: str
) -> None:
    code, marker = KERNEL_STOPS[what]
    result = box.run(code, limits=KERNEL_ONLY)
    assert result.status == "blocked" and marker not in result.stdout, result


def test_threads_and_fork_still_work_under_the_filter(box: ForkServerSandbox) -> None:
    code = (
        "import os, threading\nt = threading.Thread(target=print, args=('thread',))\nt.start()\nt.join()\n"
        "pid = os.fork()\nif pid == 0:\n    os._exit(7)\nprint('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"
    )
    result = box.run(code, limits=KERNEL_ONLY)
    assert result.ok and result.stdout == "thread\nchild 7\n", result
