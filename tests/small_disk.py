"""A real full disk for tests: a script runs with a small tmpfs mounted over one folder, in a mount namespace of
its own (``unshare``: as root directly, otherwise through a user namespace), so nothing on the host changes.

The script sees the folder as ``$DISK``; ``fill LEFT`` takes all but LEFT bytes of it. What it prints comes back;
the tmpfs, and everything written into it, disappears when the script ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LLM_GYM = str(Path(sys.executable).parent / "llm-gym")

_PRELUDE = """
set -u
fill() {  # take all but $1 bytes of the disk
    local free=$(( $(stat -f -c '%a*%S' "$DISK") ))
    head -c $(( free - $1 > 0 ? free - $1 : 0 )) /dev/zero > "$DISK/.fill" 2>/dev/null || true
}
"""


def on_small_disk(folder: Path, size: str, script: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run bash ``script`` with a ``size`` tmpfs (``300k``, ``4m``) mounted on ``folder`` (made if missing); the
    script finds it in ``$DISK`` and the llm-gym script in ``$LLM_GYM``. Skips the test where no mount namespace
    can be had."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux) for a private tmpfs")
    folder.mkdir(parents=True, exist_ok=True)
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    body = _PRELUDE + f'mount -t tmpfs -o size={size} tmpfs "$DISK" || exit 77\n' + textwrap.dedent(script)
    env = {k: v for k, v in os.environ.items() if k != "LLM_GYM_DEBUG"}
    env |= {"DISK": str(folder), "LLM_GYM": LLM_GYM}
    done = subprocess.run(
        ["unshare", *user, "--mount", "bash", "-c", body], capture_output=True, text=True, env=env, timeout=timeout
    )
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip(f"no private tmpfs here: {done.stderr.strip()[-200:]}")
    return done


def error_lines(stderr: str) -> list[str]:
    """The ``error:`` lines of a command's stderr (and no traceback anywhere in it)."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error: ")]
