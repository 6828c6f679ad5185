"""The real ``llm-gym`` script in a subprocess, and the one-line error it must give on bad input: shared by the
tests that work on run directories from outside (``test_run_damage.py``, ``test_copy_policy.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LLM_GYM = str(Path(sys.executable).parent / "llm-gym")


def llm_gym(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``llm-gym ARGS`` (``env``: variables set on top of this process's environment)."""
    environment = {k: v for k, v in os.environ.items() if k != "LLM_GYM_DEBUG"} | (env or {})
    return subprocess.run([LLM_GYM, *args], capture_output=True, text=True, env=environment, timeout=600)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of a refused command (exit 2, no traceback; ``note:`` lines may come before it)."""
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("note: ")]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]
