"""Helpers for tests (of llm-gym and of its plugins) that run the real ``llm-gym`` CLI, in a subprocess or in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from typer.testing import CliRunner

from llm_gym.cli import build_app

if TYPE_CHECKING:
    from click.testing import Result


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


def invoke(*args: str, **env: str) -> Result:
    """Run the ``llm-gym`` CLI in-process with ``args`` (and extra environment variables ``env``)."""
    return CliRunner().invoke(build_app(), list(args), env=env or None)


def error_line(result: Result) -> str:
    """The one-line ``error: ...`` a refused command prints: exit status 2, that line alone on stderr, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]
