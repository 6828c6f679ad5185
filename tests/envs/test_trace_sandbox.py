"""The Trace sandbox contains hostile programs, each with its status, and keeps working afterwards."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from llm_gym.envs.trace.confine import UID_BASE
from llm_gym.envs.trace.sandbox import STATUSES, ForkServerSandbox, FreshInterpreterSandbox, SandboxLimits

# Generous wall clock (the machine may be busy), short CPU time: a busy loop ends after 1 s of CPU.
FAST = SandboxLimits(wall_seconds=5.0, cpu_seconds=1.0)
KERNEL_ONLY = SandboxLimits(wall_seconds=5.0, cpu_seconds=1.0, audit_guard=False)
SHORT_WALL = SandboxLimits(wall_seconds=1.0, cpu_seconds=1.0)


@pytest.fixture(scope="module")
def box() -> ForkServerSandbox:
    sandbox = ForkServerSandbox()
    yield sandbox
    sandbox.close()


def _outside_path() -> Path:
    return Path(tempfile.gettempdir()) / f"llm-gym-trace-escape-{os.getpid()}.txt"


def _leftover_processes() -> list[int]:
    """Live processes that a finished program left behind (there must be none between runs).

    Every sandboxed process runs as ``UID_BASE + pid of the program's first process``; the one process whose uid
    matches its own pid is the fork server's spare child, waiting for the next program.
    """
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if uid >= UID_BASE and uid != UID_BASE + int(entry):
                found.append(int(entry))
    return found


def test_runs_a_program_with_stdin_in_a_fresh_directory(box: ForkServerSandbox) -> None:
    code = (
        "import os\nname = input()\nprint('hi', name, sum(range(5)))\nprint(os.listdir('.'))\nopen('f', 'w').write('x')"
    )
    result = box.run(code, stdin="ada\n")
    assert result.status == "ok", result
    assert result.stdout == "hi ada 10\n[]\n"  # the file of this run is not seen by the next one
    assert box.run(code, stdin="bob\n").stdout == "hi bob 10\n[]\n"


def test_output_does_not_depend_on_the_run(box: ForkServerSandbox) -> None:
    code = "import random\nprint({'pear', 'fig', 'kiwi'}, hash('abc'), random.random())"
    assert box.run(code).stdout == box.run(code).stdout


def test_isolation_layers_are_reported(box: ForkServerSandbox) -> None:
    box.run("pass")
    assert set(box.isolation) == {
        "network", "sockets", "filesystem", "readonly", "tmp", "reads", "uid", "interpreter", "signals", "processes"
    }  # fmt: skip
    assert not box.isolation["interpreter"].startswith("unreadable"), box.isolation
    assert box.missing == [], "every guarantee without the audit hook holds on this machine"


HOSTILE = {
    "infinite loop": ("while True:\n    pass", "timeout"),
    "sleeping forever": ("import time\ntime.sleep(60)", "timeout"),
    "memory bomb": ("x = bytearray(10**10)", "memory"),
    "slow memory bomb": ("xs = []\nwhile True:\n    xs.append('x' * 10**7)", "memory"),
    "deep recursion": ("def f(n):\n    return f(n + 1)\nf(0)", "error"),
    # Recursion through a C function (map) uses the C stack, so a raised limit ends in SIGSEGV.
    "C stack overflow": (
        "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return list(map(f, [n + 1]))\nf(0)",
        "crashed",
    ),
    "huge output": ("while True:\n    print('x' * 1000)", "output_limit"),
    "huge file": ("open('big', 'w').write('x' * (2 << 20))", "file_limit"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "process_limit"),
    "write outside": (f"open({str(_outside_path())!r}, 'w').write('escaped')", "blocked"),
    "open a socket": ("import socket\nsocket.create_connection(('127.0.0.1', 9))", "blocked"),
    "kill the parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "blocked"),
    "start a program": ("import subprocess\nsubprocess.run(['true'])", "blocked"),
    "native code": ("import ctypes\nctypes.CDLL(None).getpid()", "blocked"),
    "uncaught error": ("print('before')\n1 / 0", "error"),
    "syntax error": ("def f(:\n    pass", "error"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_program_is_contained(box: ForkServerSandbox, name: str) -> None:
    code, status = HOSTILE[name]
    server = box.server_pid
    result = box.run(code, limits=SHORT_WALL if name == "sleeping forever" else FAST)
    assert result.status == status, (result.status, result.detail, result.stderr[-500:])
    assert result.status in STATUSES and result.detail
    assert not _outside_path().exists()
    assert not _leftover_processes(), "everything the program started is gone"
    after = box.run("print(6 * 7)", limits=FAST)
    assert after.status == "ok" and after.stdout == "42\n", "the sandbox keeps working"
    assert server is None or box.server_pid == server, "the server survived"


def test_uncaught_error_keeps_the_output_before_it(box: ForkServerSandbox) -> None:
    result = box.run(HOSTILE["uncaught error"][0], limits=FAST)
    assert result.stdout == "before\n" and "ZeroDivisionError" in result.detail


def _require(box: ForkServerSandbox, layer: str, prefix: str) -> None:
    box.run("pass")
    if not box.isolation.get(layer, "").startswith(prefix):
        pytest.skip(f"this kernel/user gives no {layer} layer {prefix!r}: {box.isolation}")


def test_kernel_denies_writes_outside_without_the_audit_hook(box: ForkServerSandbox) -> None:
    _require(box, "filesystem", "landlock")
    result = box.run(f"open({str(_outside_path())!r}, 'w').write('escaped')", limits=KERNEL_ONLY)
    assert result.status == "error" and "PermissionError" in result.detail
    assert not _outside_path().exists()
    assert box.run("open('inside', 'w').write('ok')\nprint(open('inside').read())", limits=KERNEL_ONLY).stdout == "ok\n"


def test_kernel_denies_network_without_the_audit_hook(box: ForkServerSandbox) -> None:
    _require(box, "network", "namespace")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(0.3)
        port = listener.getsockname()[1]
        # UDP: Landlock does not cover it; the seccomp filter kills the program at socket() (status blocked).
        code = f"import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'leak', ('127.0.0.1', {port}))"
        result = box.run(code, limits=KERNEL_ONLY)
        assert result.status == "blocked" and "system call" in result.detail, result
        with pytest.raises(TimeoutError):
            listener.recvfrom(16)


def test_kernel_denies_killing_the_parent_without_the_audit_hook(box: ForkServerSandbox) -> None:
    server = box.server_pid
    result = box.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", limits=KERNEL_ONLY)
    assert result.status == "error" and "PermissionError" in result.detail
    assert box.run("print(1)").ok and box.server_pid == server


def test_kernel_denies_starting_programs_without_the_audit_hook(box: ForkServerSandbox) -> None:
    _require(box, "filesystem", "landlock")
    result = box.run("import subprocess\nsubprocess.run(['/bin/true'])", limits=KERNEL_ONLY)
    assert result.status == "error" and "PermissionError" in result.detail


@pytest.mark.parametrize("victim", ["server_pid", "zygote_pid"])
def test_a_dead_server_is_replaced(victim: str) -> None:
    box = ForkServerSandbox()
    assert box.run("print(1)").ok
    os.kill(getattr(box, victim), 9)
    result = box.run("print(2)")  # the loss is noticed, and either reported or repaired at once
    assert result.status in ("ok", "crashed")
    assert box.run("print(3)").stdout == "3\n"
    box.close()


def test_fresh_interpreter_isolates_the_same_way(box: ForkServerSandbox) -> None:
    fresh = FreshInterpreterSandbox()
    for name in ("write outside", "open a socket", "memory bomb", "uncaught error"):
        code, status = HOSTILE[name]
        assert fresh.run(code, limits=FAST).status == status == box.run(code, limits=FAST).status
    code = "print(input()[::-1], {'b', 'a', 'c'})"
    assert fresh.run(code, "abc\n").stdout == box.run(code, "abc\n").stdout == "cba {'c', 'a', 'b'}\n"
    fresh.close()


# -- reading secrets -------------------------------------------------------------------------------------------------

SECRET = "the-secret-0f-this-machine"


@pytest.fixture(scope="module")
def secrets() -> dict[str, Path]:
    """A root-only 0600 file outside the home directory (as root only) and a world-readable file under $HOME."""
    made: dict[str, Path] = {}
    home = Path(os.path.expanduser("~")) / f".llm-gym-sandbox-test-{os.getpid()}"
    home.write_text(SECRET)
    home.chmod(0o644)  # readable by any user: only the sandbox's read allow-list keeps it out
    made["home file"] = home
    if os.geteuid() == 0:
        fd, name = tempfile.mkstemp(prefix="llm-gym-root-only-")
        os.write(fd, SECRET.encode())
        os.close(fd)
        os.chmod(name, 0o600)
        made["root-only 0600 file"] = Path(name)
    yield made
    for path in made.values():
        path.unlink(missing_ok=True)


def _read_program(path: Path) -> str:
    return f"print(open({str(path)!r}).read())"


@pytest.mark.parametrize("kind", ["fork_server", "fresh_interpreter"])
def test_programs_cannot_read_secrets(box: ForkServerSandbox, secrets: dict[str, Path], kind: str) -> None:
    runner = box if kind == "fork_server" else FreshInterpreterSandbox()
    if os.geteuid() != 0:
        assert "root-only 0600 file" not in secrets  # (it can only be made as root)
    for name, path in secrets.items():
        for code in (_read_program(path), f"import os\nprint(os.listdir({str(path.parent)!r}))"):
            result = runner.run(code, limits=FAST)
            assert result.status == "blocked", (name, result)
            assert SECRET not in result.stdout + result.stderr and path.name not in result.stdout
        # the audit guard reports the attempt even when the program swallows the error
        result = runner.run(f"try:\n    {_read_program(path)}\nexcept OSError:\n    print('denied')", limits=FAST)
        assert result.status == "blocked" and result.stdout == "denied\n", (name, result)


def test_kernel_denies_reading_secrets_without_the_audit_hook(box: ForkServerSandbox, secrets: dict) -> None:
    box.run("pass")
    for name, path in secrets.items():
        protected = box.isolation["reads"].startswith("landlock") or (
            name == "root-only 0600 file" and box.isolation["uid"] == "dedicated-no-capabilities"
        )
        if not protected:
            continue  # no kernel layer covers it here (no Landlock, not root): the audit guard alone does
        result = box.run(_read_program(path), limits=KERNEL_ONLY)
        assert result.status == "error" and SECRET not in result.stdout + result.stderr, (name, result)
        # /root is hidden behind an empty tmpfs in the sandbox's mount namespace: "no such file" there
        assert "PermissionError" in result.detail or "FileNotFoundError" in result.detail, result.detail
    if not box.isolation["reads"].startswith("landlock"):
        pytest.skip(f"no Landlock here: reads are refused by the uid and the audit hook only ({box.isolation})")
    result = box.run("print(open('/etc/passwd').read())", limits=KERNEL_ONLY)
    assert result.status == "error" and "PermissionError" in result.detail and "root:" not in result.stdout


def test_sandbox_uid_has_no_capabilities(box: ForkServerSandbox) -> None:
    box.run("pass")
    if box.isolation["uid"] != "dedicated-no-capabilities":
        pytest.skip("not root: programs run as this user, who has no capabilities to drop")
    # capget through ctypes (allowed without the audit hook): effective and permitted sets of both words
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None)\nheader = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"
        "data = (ctypes.c_uint32 * 6)()\nassert libc.capget(header, data) == 0\nprint(list(data), __import__('os').getuid())"
    )
    result = box.run(code, limits=KERNEL_ONLY)
    assert result.status == "ok", result
    caps, uid = result.stdout.rsplit("] ", 1)
    assert caps == "[0, 0, 0, 0, 0, 0" and int(uid) >= UID_BASE


def test_the_standard_library_still_imports_and_nothing_else_does(box: ForkServerSandbox) -> None:
    # Modules the server does not preload: read from disk by the sandbox uid (shared libraries included).
    code = (
        "import zlib, hashlib, datetime, fractions, sqlite3, xml.dom.minidom, email.utils, zoneinfo\n"
        "print(zlib.crc32(b'x'), hashlib.sha256(b'x').hexdigest()[:8], fractions.Fraction(2, 6))\n"
        "print('caf\u00e9'.encode('latin-1'), datetime.date(2024, 2, 29).isoformat())"
    )
    result = box.run(code, limits=FAST)
    assert result.status == "ok", result
    assert result.stdout == "2363233923 2d711642 1/3\nb'caf\\xe9' 2024-02-29\n"
    # site-packages is not readable there: a third-party import fails cleanly as "not found"
    result = box.run("try:\n    import numpy\nexcept ImportError as e:\n    print(type(e).__name__)", limits=FAST)
    assert result.status == "ok" and result.stdout == "ModuleNotFoundError\n", result
