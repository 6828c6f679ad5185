"""Helpers for tests (of llm-gym and of its plugins) that run the real ``llm-gym`` CLI in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def cli_command(*args: str) -> list[str]:
    """The ``llm-gym`` entry point installed beside this interpreter, with ``args``."""
    return [str(Path(sys.executable).parent / "llm-gym"), *args]


def kill_once_written(command: list[str], wanted: Path, *, timeout: float, poll: float = 0.02) -> str:
    """Run ``command`` (torch on one thread) and kill it with SIGKILL as soon as ``wanted`` exists, it exits on its
    own, or ``timeout`` seconds pass. Returns the tail of its stderr, for the message of the caller's assertion."""
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    deadline = time.monotonic() + timeout
    while not wanted.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(poll)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.stderr is not None
    return process.stderr.read().decode()[-2000:]
