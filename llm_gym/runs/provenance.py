"""Which code a run was made with (``config.json``'s ``code``): the package version and, where the package runs from a
git checkout, its commit and whether tracked files differed from it. A learning result is reproduced by its command
on the same code: an optimisation that rounds a forward pass differently can change a training run's outcome as a
new seed would, so the command alone does not pin it."""

from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def code_version(source: Path = PACKAGE_DIR) -> dict[str, Any]:
    """``{"llm_gym": version, "commit": sha or None, "modified": bool or None}``; None where ``source`` is not in a
    git checkout (an installed wheel) or git cannot tell in two seconds."""
    try:
        installed: str | None = version("llm-gym")
    except PackageNotFoundError:  # run from a source tree that was never installed
        installed = None
    return {"llm_gym": installed, **_git_state(source)}


def _git_state(source: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=2, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    # The package's own files must be tracked there: a wheel installed in a venv inside some other project's
    # checkout would otherwise report that project's commit.
    commit = git("rev-parse", "HEAD") if git("ls-files", "--error-unmatch", "__init__.py") is not None else None
    if not commit:
        return {"commit": None, "modified": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "modified": None if status is None else bool(status)}
