"""Run directories: ``runs/<env>__<agent>__<seed>__<time>/`` with the resolved config, TensorBoard scalars,
atomic checkpoints, videos and ``summary.json``.

A checkpoint is written into a hidden temp directory and renamed into place, so ``checkpoints/step_N`` is either
complete or absent; a run killed at any moment resumes from its newest complete checkpoint. Its ``checkpoint.json``
holds a manifest (size and SHA-256 of every file), checked before a checkpoint is used: a damaged one (a truncated
or altered file) is skipped, with a note, for the newest one that verifies. A named checkpoint (``best``) is
replaced through a recoverable name, so a kill at any moment leaves the old or the new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_gym.atomic import write_json_atomic, writing
from llm_gym.errors import CheckpointError, LLMGymError
from llm_gym.runs.checkpoint_files import MANIFEST_FILE, STEP_DIR, _manifest, _read_manifest, verify_checkpoint
from llm_gym.runs.lock import LOCK_FILE, RunLock
from llm_gym.runs.model_card import write_model_card
from llm_gym.runs.provenance import code_version
from llm_gym.runs.trackers import open_trackers

CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
CHECKPOINTS_DIR = "checkpoints"
_OLD_PREFIX = ".old-"  # a named checkpoint being replaced; restored by Run.open if the new one never arrived
_RUN_KEYS = ("agent", "env_id", "config")
_NOTED: set[str] = set()


def default_run_name(env_id: str, agent: str, seed: int) -> str:
    """``<env>__<agent>__<seed>__<time>``, safe as a directory name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return "__".join(re.sub(r"[^A-Za-z0-9_.-]", "-", part) for part in (env_id, agent, str(seed), stamp))


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run directory's ``summary.json``; ``{}`` while it has none that reads as an object (the run has not
    finished, or was stopped while writing it): readers treat a missing summary and a broken one alike."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


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
        self.checkpoints_dir = self.path / CHECKPOINTS_DIR
        self.videos_dir = self.path / "videos"
        self._writer: list[Any] | None = None
        self.resumed_from: Path | None = None
        self._lock: RunLock | None = None

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
        """Make a new run directory and write the resolved config into it; the run is locked to this process
        (:mod:`llm_gym.runs.lock`) until :meth:`close`. An existing directory must be empty: one that holds a run
        is resumed (``--resume``), one that holds anything else is not ours to fill."""
        seed = int(config.get("seed", 0))
        run = cls(Path(path) if path else Path(root) / default_run_name(env_id, agent, seed))
        run._refuse_taken()
        try:
            run.path.mkdir(parents=True, exist_ok=True)
            run._lock = RunLock.acquire(run.path)
            run._refuse_taken()  # again, now that no other process can be creating it at the same time
            run.checkpoints_dir.mkdir(exist_ok=True)
            write_json_atomic(
                run.path / CONFIG_FILE,
                {
                    "agent": agent,
                    "env_id": env_id,
                    "env_kwargs": dict(env_kwargs or {}),
                    "config": dict(config),
                    "code": code_version(),  # which code made the run: the command alone does not pin a result
                },
            )
        except OSError as exc:
            run.close()
            raise CheckpointError(f"cannot create the run directory {run.path}: {exc.strerror or exc}") from exc
        except CheckpointError:
            run.close()
            raise
        return run

    def _refuse_taken(self) -> None:
        if (self.path / CONFIG_FILE).exists():
            raise CheckpointError(
                f"{self.path} already holds a run; resume it with --resume {self.path} or pick another --run-dir"
            )
        if self.path.exists() and not self.path.is_dir():
            raise CheckpointError(f"{self.path} is a file; pass a new directory for the run")
        if self.path.is_dir() and any(p.name != LOCK_FILE for p in self.path.iterdir()):
            raise CheckpointError(
                f"{self.path} is not empty and holds no run; pass a new or empty directory (train writes config.json, "
                "checkpoints/ and logs into it)"
            )

    @classmethod
    def resolve_checkpoint(cls, path: str | Path, *, required: bool = True) -> tuple[Run, Path | None]:
        """The run a checkpoint belongs to and the checkpoint itself: ``<run>/checkpoints/step_N`` (or ``best``) as
        given, a run directory as its newest complete checkpoint. A run without one raises when ``required``, else
        gives None (agents that learn nothing, such as baselines, have no checkpoints)."""
        run = cls.open(find_run_dir(path))
        if Path(path).resolve() == run.checkpoints_dir.resolve():
            raise CheckpointError(
                f"{path} holds the run's checkpoints; pass the run {run.path} (its newest checkpoint that verifies) "
                f"or one checkpoint in it ({', '.join(c.name for _, c in run.checkpoints()) or 'none yet'})"
            )
        if Path(path).resolve() != run.path.resolve():
            problem = verify_checkpoint(Path(path))
            if problem:
                raise CheckpointError(f"checkpoint {path} is damaged ({problem}); pass its run directory to use the "
                                      "newest checkpoint that verifies")  # fmt: skip
            return run, Path(path)
        latest = run.latest_verified_checkpoint()
        if latest is None and required:
            raise CheckpointError(f"{run.path} has no complete checkpoint yet (none that verifies)")
        return run, latest

    @classmethod
    def open(cls, path: str | Path, *, claim: bool = False) -> Run:
        """Reopen an existing run; leftovers of an interrupted checkpoint are removed. ``claim=True`` (``--resume``)
        locks the run to this process until :meth:`close` and raises while another process trains into it; without
        it the run is only read, and the leftovers are left to a process that is writing them."""
        run = cls(path)
        if not (run.path / CONFIG_FILE).is_file():
            raise CheckpointError(
                f"{run.path} is not a run directory (no {CONFIG_FILE}); pass the directory train created"
            )
        run.read_config()  # a damaged config.json is reported here, before anything else is touched
        if claim:
            run._lock = RunLock.acquire(run.path)
        leftovers = run.checkpoints_dir.is_dir() and any(
            p.name.startswith((".tmp-", _OLD_PREFIX)) for p in run.checkpoints_dir.iterdir()
        )
        if not claim and not leftovers:
            return run  # a reader with nothing to tidy writes nothing (not even the lock file)
        cleaner = run._lock or RunLock.try_acquire(run.path)
        if cleaner is None:
            return run  # another process trains into it: its temporary checkpoint is no leftover
        try:
            run.checkpoints_dir.mkdir(exist_ok=True)
            for leftover in run.checkpoints_dir.glob(".tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            for old in sorted(run.checkpoints_dir.glob(_OLD_PREFIX + "*")):
                name = old.name[len(_OLD_PREFIX) :].rsplit("-", 1)[0]
                if (run.checkpoints_dir / name).exists():
                    shutil.rmtree(old, ignore_errors=True)
                else:  # killed between the two renames of a replacement: the old one comes back
                    os.rename(old, run.checkpoints_dir / name)
        except OSError as exc:
            run.close()
            raise CheckpointError(f"cannot use the run directory {run.path}: {exc.strerror or exc}") from exc
        finally:
            if cleaner is not run._lock:
                cleaner.release()
        return run

    # -- config ------------------------------------------------------------------------------------------------

    def read_config(self) -> dict[str, Any]:
        """``{"agent", "env_id", "env_kwargs", "config"}`` as written by :meth:`create`; a damaged file raises
        :class:`CheckpointError` naming what is wrong."""
        path = self.path / CONFIG_FILE
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path} is damaged or unreadable ({type(exc).__name__}: {exc})") from exc
        missing = [key for key in _RUN_KEYS if not isinstance(data, dict) or key not in data]
        if missing and isinstance(data, dict) and ("model_type" in data or "architectures" in data):
            raise CheckpointError(
                f"{self.path} is a model directory, not an llm-gym run; play it with --agent lm --model {self.path}"
            )
        if missing or not isinstance(data.get("config"), dict):
            raise CheckpointError(f"{path} is damaged: it lacks {', '.join(missing) or 'a config table'}")
        data.setdefault("env_kwargs", {})
        for key, kind in (("agent", str), ("env_id", str), ("env_kwargs", dict)):
            if not isinstance(data[key], kind):
                raise CheckpointError(
                    f"{path} is damaged: {key} is a {type(data[key]).__name__}, not a {'table' if kind is dict else 'name'}"
                )
        return data

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
        # A full disk or an unwritable run, whatever writes (the agent's torch.save, the manifest): one line naming
        # the checkpoint; the temporary folder goes, the previous checkpoints stay.
        keeps = "the previous checkpoints are kept; free some space, then resume with --resume"
        try:
            with writing(final, keeps):
                tmp.mkdir(parents=True)
                yield tmp
                write_model_card(tmp, final, self.read_config(), step)
                write_json_atomic(tmp / MANIFEST_FILE, {"step": step, "time": time.time(), "files": _manifest(tmp)})
                _fsync_tree(tmp)
                if final.exists():
                    # Not a .tmp- name: Run.open renames it back if a kill comes before the second rename.
                    old = self.checkpoints_dir / f"{_OLD_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
                    os.rename(final, old)
                    os.rename(tmp, final)
                    shutil.rmtree(old, ignore_errors=True)
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
                match = STEP_DIR.match(child.name)
                if match and _read_manifest(child) is not None:
                    found.append((int(match.group(1)), child))
        return sorted(found)

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None (not verified: see :meth:`latest_verified_checkpoint`)."""
        found = self.checkpoints()
        return found[-1][1] if found else None

    def latest_verified_checkpoint(self) -> Path | None:
        """The newest checkpoint whose files match its manifest, or None; each damaged one skipped is reported on
        stderr (one line each, with what is wrong)."""
        for _, path in reversed(self.checkpoints()):
            problem = verify_checkpoint(path)
            if problem is None:
                return path
            note = f"note: skipping damaged checkpoint {path} ({problem})"
            if note not in _NOTED:  # once per process (a command may look for the checkpoint twice)
                _NOTED.add(note)
                print(note, file=sys.stderr)
        return None

    def prune_checkpoints(self, keep: int) -> None:
        """Delete all but the newest ``keep`` step checkpoints (named ones such as ``best`` stay)."""
        for _, path in self.checkpoints()[:-keep] if keep > 0 else []:
            shutil.rmtree(path, ignore_errors=True)

    # -- logs --------------------------------------------------------------------------------------------------

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Write scalars to the run's trackers (:mod:`llm_gym.runs.trackers`): TensorBoard (``<run>/tb``), and W&B
        where the config says ``tracker=wandb``."""
        if self._writer is None:
            # A resumed run hides what the stopped one logged after its checkpoint. Scalars *at* the checkpoint's
            # step were logged before it was written (the loops log, evaluate, then checkpoint), so they stay.
            purge = (
                int(json.loads((self.resumed_from / "checkpoint.json").read_text())["step"]) + 1
                if self.resumed_from
                else None
            )
            config = self.read_config().get("config") or {}
            self._writer = open_trackers(str(config.get("tracker", "tensorboard")), self.path, config, purge)
        for tracker in self._writer:
            tracker.log(step, scalars)

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """Write ``summary.json`` (atomically) and return its path."""
        path = self.path / SUMMARY_FILE
        write_json_atomic(path, dict(summary))
        return path

    def read_summary(self) -> dict[str, Any]:
        """What :meth:`write_summary` wrote; ``{}`` while the run has no readable summary (it has not finished)."""
        return read_summary(self.path)

    def video_path(self, name: str) -> Path:
        """Where a video called ``name`` goes (``<run>/videos/<name>``)."""
        self.videos_dir.mkdir(exist_ok=True)
        return self.videos_dir / name

    def close(self) -> None:
        if self._writer is not None:
            for tracker in self._writer:
                tracker.close()
            self._writer = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def find_run_dir(checkpoint: str | Path) -> Path:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/step_N`` -> ``<run>``), or the path itself
    when it is a run directory."""
    path = Path(checkpoint)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist; pass a run directory or one of its checkpoints/step_N")
    for candidate in (path, path.parent, path.parent.parent):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    for inner, run in zip(path.parents, list(path.parents)[2:], strict=False):  # a folder inside a checkpoint
        if inner.parent.name == CHECKPOINTS_DIR and (run / CONFIG_FILE).is_file():
            raise CheckpointError(f"{path} is a folder inside the checkpoint {inner}; pass {inner} (or the run {run})")
    raise CheckpointError(f"{path} is not a checkpoint of an llm-gym run (no {CONFIG_FILE} above it)")


def trained_env_kwargs(checkpoint: str | Path | None) -> dict[str, Any]:
    """The env arguments the checkpoint's run trained with (none for a checkpoint outside a run directory)."""
    if checkpoint is None:
        return {}
    try:
        run, _ = Run.resolve_checkpoint(checkpoint, required=False)
        return dict(run.read_config().get("env_kwargs") or {})
    except LLMGymError:
        return {}


def played_history(env_kwargs: Mapping[str, Any], checkpoint: str | Path | None) -> int:
    """How many earlier turns a checkpoint's LM policy shows (``history=K``): the env's own ``history`` where the
    player gives one, else the one its run trained with, so a checkpoint plays on the prompts it learnt on."""
    return int(env_kwargs.get("history", 0) or trained_env_kwargs(checkpoint).get("history", 0) or 0)
