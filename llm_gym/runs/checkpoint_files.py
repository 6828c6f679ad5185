"""What a checkpoint folder holds and how it is checked: the manifest (``checkpoint.json``: the step and every
file's size and SHA-256) written last, and :func:`verify_checkpoint`, run before a checkpoint is used.

A checkpoint folder is data a run directory may have brought from anywhere: its manifest's step must be one a run
can reach, it holds plain files only (no symbolic links), and every file must match the manifest. Whether the
files also load is the agent's to say (``llm_gym.agent.load_policy`` turns a failure into one line).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

MANIFEST_FILE = "checkpoint.json"
STEP_DIR = re.compile(r"^step_(\d+)$")
"""The folder name of the checkpoint at step N."""


def _manifest(directory: Path) -> dict[str, list]:
    """``{relative path: [size, sha256]}`` of every file under ``directory`` but the manifest itself."""
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST_FILE:
            with open(path, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            files[path.relative_to(directory).as_posix()] = [path.stat().st_size, digest]
    return files


def _read_manifest(checkpoint: Path) -> dict[str, Any] | None:
    """The checkpoint's ``checkpoint.json`` if it is a JSON object with an integer step, else None."""
    try:
        data = json.loads((checkpoint / MANIFEST_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("step"), int) else None


MAX_STEP = 2**53
"""The largest step a checkpoint may record (what JSON readers and TensorBoard's int64 steps hold exactly)."""


def verify_checkpoint(checkpoint: Path, missing_ok: tuple[str, ...] = ()) -> str | None:
    """None when every file of ``checkpoint`` has the size and SHA-256 its manifest records, else what is wrong.
    Files named in ``missing_ok`` may be absent (a copy made without its training state), never different. The
    step must be one a run can reach (0 ..< 2**53) and a ``step_N`` folder's own N; a checkpoint holds plain files
    only (a symbolic link could point anywhere: a device that never ends, another user's file).

    Checkpoints written before manifests existed (no ``files``) pass on a readable ``checkpoint.json``."""
    manifest = _read_manifest(checkpoint)
    if manifest is None:
        return f"no readable {MANIFEST_FILE}"
    step, folder = manifest["step"], STEP_DIR.match(checkpoint.name)
    if not 0 <= step < MAX_STEP or (folder is not None and step != int(folder.group(1))):
        return f"{MANIFEST_FILE} records step {step}" + (f", not {folder.group(1)}" if folder else "")
    for path in checkpoint.rglob("*"):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            return f"{path.relative_to(checkpoint)} is {'a symbolic link' if path.is_symlink() else 'not a file'}"
    files = manifest.get("files", {})
    if not isinstance(files, dict):
        return f"{MANIFEST_FILE} has no file list"
    for name, entry in files.items():
        path = checkpoint / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            return f"{MANIFEST_FILE} lists {name!r}, outside the checkpoint"
        if not path.is_file():
            if name in missing_ok:
                continue
            return f"{name} is missing"
        size = path.stat().st_size
        if not isinstance(entry, list) or len(entry) != 2 or size != entry[0]:
            return f"{name} has {size} bytes, {entry[0] if isinstance(entry, list) else '?'} were written"
        with open(path, "rb") as handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != entry[1]:
                return f"{name} does not match its checksum"
    return None
