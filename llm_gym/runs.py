"""Run directories: ``runs/<env>__<agent>__<seed>__<time>/`` with the resolved config, TensorBoard scalars,
atomic checkpoints, videos and ``summary.json``.

A checkpoint is written into a hidden temp directory and renamed into place, so ``checkpoints/step_N`` is either
complete or absent; a run killed at any moment resumes from its newest complete checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_gym.errors import CheckpointError
from llm_gym.snapshots import can_pickle  # noqa: F401  (its old home; agents import it from llm_gym.snapshots)

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def default_run_name(env_id: str, agent: str, seed: int) -> str:
    """``<env>__<agent>__<seed>__<time>``, safe as a directory name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return "__".join(re.sub(r"[^A-Za-z0-9_.-]", "-", part) for part in (env_id, agent, str(seed), stamp))


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Run:
    """A run directory. Create one with :meth:`create`, reopen one with :meth:`open`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.checkpoints_dir = self.path / "checkpoints"
        self.videos_dir = self.path / "videos"
        self._writer: Any = None
        self.resumed_from: Path | None = None

    @classmethod
    def create(
        cls,
        env_id: str,
        agent: str,
        config: Mapping[str, Any],
        *,
        root: str | Path = "runs",
        path: str | Path | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> Run:
        """Make a new run directory and write the resolved config into it."""
        seed = int(config.get("seed", 0))
        run = cls(Path(path) if path else Path(root) / default_run_name(env_id, agent, seed))
        if (run.path / CONFIG_FILE).exists():
            raise CheckpointError(
                f"{run.path} already holds a run; resume it with --resume {run.path} or pick another --run-dir"
            )
        run.path.mkdir(parents=True, exist_ok=True)
        run.checkpoints_dir.mkdir(exist_ok=True)
        write_json_atomic(
            run.path / CONFIG_FILE,
            {"agent": agent, "env_id": env_id, "env_kwargs": dict(env_kwargs or {}), "config": dict(config)},
        )
        return run

    @classmethod
    def resolve_checkpoint(cls, path: str | Path, *, required: bool = True) -> tuple[Run, Path | None]:
        """The run a checkpoint belongs to and the checkpoint itself: ``<run>/checkpoints/step_N`` (or ``best``) as
        given, a run directory as its newest complete checkpoint. A run without one raises when ``required``, else
        gives None (agents that learn nothing, such as baselines, have no checkpoints)."""
        run = cls.open(find_run_dir(path))
        if Path(path).resolve() != run.path.resolve():
            return run, Path(path)
        latest = run.latest_checkpoint()
        if latest is None and required:
            raise CheckpointError(f"{run.path} has no complete checkpoint yet")
        return run, latest

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """Reopen an existing run (for ``--resume``); leftovers of an interrupted checkpoint are removed."""
        run = cls(path)
        if not (run.path / CONFIG_FILE).is_file():
            raise CheckpointError(
                f"{run.path} is not a run directory (no {CONFIG_FILE}); pass the directory train created"
            )
        run.checkpoints_dir.mkdir(exist_ok=True)
        for leftover in run.checkpoints_dir.glob(".tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return run

    # -- config ------------------------------------------------------------------------------------------------

    def read_config(self) -> dict[str, Any]:
        """``{"agent", "env_id", "env_kwargs", "config"}`` as written by :meth:`create`."""
        return json.loads((self.path / CONFIG_FILE).read_text())

    def update_config(self, config: Mapping[str, Any]) -> None:
        """Replace the agent config (``--resume`` with ``--set`` overrides)."""
        data = self.read_config()
        data["config"] = dict(config)
        write_json_atomic(self.path / CONFIG_FILE, data)

    # -- checkpoints -------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def checkpoint(self, step: int, name: str | None = None) -> Iterator[Path]:
        """Yield a temp directory to write a checkpoint into; on success it becomes ``checkpoints/step_<step>``
        (or ``checkpoints/<name>``) in one rename. On an exception nothing is left behind."""
        final = self.checkpoints_dir / (name or f"step_{step}")
        tmp = self.checkpoints_dir / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            yield tmp
            write_json_atomic(tmp / "checkpoint.json", {"step": step, "time": time.time()})
            _fsync_tree(tmp)
            if final.exists():
                stale = self.checkpoints_dir / f".tmp-old-{final.name}-{uuid.uuid4().hex[:8]}"
                os.rename(final, stale)
                os.rename(tmp, final)
                shutil.rmtree(stale, ignore_errors=True)
            else:
                os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Complete ``step_N`` checkpoints, oldest first."""
        found = []
        if self.checkpoints_dir.is_dir():
            for child in self.checkpoints_dir.iterdir():
                match = _STEP_DIR.match(child.name)
                if match and (child / "checkpoint.json").is_file():
                    found.append((int(match.group(1)), child))
        return sorted(found)

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        found = self.checkpoints()
        return found[-1][1] if found else None

    def prune_checkpoints(self, keep: int) -> None:
        """Delete all but the newest ``keep`` step checkpoints (named ones such as ``best`` stay)."""
        for _, path in self.checkpoints()[:-keep] if keep > 0 else []:
            shutil.rmtree(path, ignore_errors=True)

    # -- logs --------------------------------------------------------------------------------------------------

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Write scalars to TensorBoard (``<run>/tb``)."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter  # heavy; only runs that log pay for it

            purge = (
                int(json.loads((self.resumed_from / "checkpoint.json").read_text())["step"])
                if self.resumed_from
                else None
            )
            self._writer = SummaryWriter(str(self.path / "tb"), purge_step=purge)
        for key, value in scalars.items():
            self._writer.add_scalar(key, float(value), step)

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """Write ``summary.json`` (atomically) and return its path."""
        path = self.path / SUMMARY_FILE
        write_json_atomic(path, dict(summary))
        return path

    def video_path(self, name: str) -> Path:
        """Where a video called ``name`` goes (``<run>/videos/<name>``)."""
        self.videos_dir.mkdir(exist_ok=True)
        return self.videos_dir / name

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def find_run_dir(checkpoint: str | Path) -> Path:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/step_N`` -> ``<run>``), or the path itself
    when it is a run directory."""
    path = Path(checkpoint)
    for candidate in (path, path.parent, path.parent.parent):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise CheckpointError(f"{path} is not a checkpoint of an llm-gym run (no {CONFIG_FILE} above it)")
